import { spawn, execFile, type ChildProcess } from 'node:child_process'
import { mkdtemp, rm, stat } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { stopEmbedded } from '../src/db/embedded.ts'
import { generateApiKey } from '../src/modules/users/keys.ts'
import { createTestDatabase } from './helpers/database.ts'

const ROOT = path.resolve(import.meta.dirname, '..')

interface Server { child: ChildProcess, url: string, output: () => string, exited: Promise<number | null> }

/** Starts `node src/main.ts` as `npm start` would and waits for its "listening on" line. */
async function start (env: Record<string, string>): Promise<Server> {
  const child = spawn(process.execPath, ['src/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let output = ''
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const match = /listening on (http:\/\/[^"\s]+)/.exec(output)
      if (match !== null) resolve(match[1])
    }
    child.stdout!.on('data', onData)
    child.stderr!.on('data', onData)
    exited.then((code) => reject(new Error(`server exited with ${code} before listening:\n${output}`)))
  })
  return { child, url, output: () => output, exited }
}

async function stop (server: Server): Promise<number | null> {
  server.child.kill('SIGTERM')
  return await server.exited
}

async function get (server: Server, route: string, key?: string): Promise<{ status: number, body: unknown }> {
  const res = await fetch(server.url + route, { headers: key === undefined ? {} : { 'x-api-key': key } })
  return { status: res.status, body: await res.json() }
}

const cli = (env: Record<string, string>, ...args: string[]) =>
  promisify(execFile)(process.execPath, ['scripts/cli.ts', ...args], { cwd: ROOT, env: { ...process.env, ...env } })

t.test('the server starts on DATABASE_URL, serves, and stops cleanly on SIGTERM', async (t) => {
  const key = generateApiKey()
  const server = await start({ DATABASE_URL: await createTestDatabase(t), BOOTSTRAP_API_KEY: key })
  t.teardown(() => { server.child.kill('SIGKILL') })

  t.same(await get(server, '/health'), { status: 200, body: { status: 'ok', database: 'up' } })
  const voices = await get(server, '/v1/voice/list', key)
  t.equal(voices.status, 200)
  t.ok(Array.isArray(voices.body) && voices.body.length > 0)
  t.match(server.output(), /created the owner account owner@localhost/)
  t.notMatch(server.output(), key, 'a key given in BOOTSTRAP_API_KEY is not echoed')

  t.equal(await stop(server), 0)
  t.match(server.output(), /SIGTERM: finishing in-flight requests and jobs[\s\S]*"stopped"/)
})

t.test('a bad setting stops start-up with one line naming the variable', async (t) => {
  const child = spawn(process.execPath, ['src/main.ts'], { cwd: ROOT, env: { ...process.env, PORT: 'eighty' }, stdio: ['ignore', 'pipe', 'pipe'] })
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
  const second = spawn(process.execPath, ['src/main.ts'], { cwd: ROOT, env: { ...process.env, ...env, PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] })
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
