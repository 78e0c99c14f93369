import net from 'node:net'
import { sql } from 'kysely'
import pino from 'pino'
import t from 'tap'
import { poolOf, type DB } from '../../src/db/database.ts'
import { createAccount, setup, type Account } from '../helpers/app.ts'
import { poll } from '../helpers/poll.ts'

const BOUNDARY = 'slowclientboundary'

/** Opens a raw connection that sends a request's head and the start of its body, then nothing more. */
async function trickle (port: number, head: string, body: string): Promise<net.Socket> {
  const socket = net.connect(port, '127.0.0.1')
  socket.on('error', () => {})
  await new Promise((resolve) => socket.once('connect', resolve))
  socket.write(head + body)
  return socket
}

function slowUpload (port: number, account: Account): Promise<net.Socket> {
  const body = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="name"\r\n\r\nSlow\r\n` +
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="description"\r\n\r\nSlow upload\r\n` +
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="slow.txt"\r\nContent-Type: text/plain\r\n\r\nThe first bytes of many`
  return trickle(port, `POST /v1/knowledge-base HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${account.key}\r\n` +
    `Content-Type: multipart/form-data; boundary=${BOUNDARY}\r\nContent-Length: 1000000\r\n\r\n`, body)
}

/** A download whose client reads nothing: its socket is paused, so the server's writes back up. */
async function stalledExport (port: number, account: Account, query: string): Promise<net.Socket> {
  const socket = await trickle(port, `GET /v1/call/list/export?${query} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${account.key}\r\n\r\n`, '')
  socket.pause()
  return socket
}

/** A download whose client reads the answer's head, then nothing more; answers the head. */
async function headThenStall (port: number, account: Account, query: string): Promise<{ socket: net.Socket, head: string }> {
  const socket = await trickle(port, `GET /v1/call/list/export?${query} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${account.key}\r\n\r\n`, '')
  let received = ''
  await new Promise<void>((resolve) => {
    socket.on('data', function onData (chunk: Buffer) {
      received += chunk.toString('latin1')
      if (!received.includes('\r\n\r\n')) return
      socket.off('data', onData)
      socket.pause()
      resolve()
    })
  })
  return { socket, head: received.split('\r\n\r\n')[0] }
}

/** ~12 MB of calls for `account` on 2026 days, more than loopback socket buffers hold; an hour apart, since thousands on one day's rollup row are slow. */
async function manyCalls (db: DB, account: Account, agentId: string): Promise<void> {
  await sql`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, start_timestamp, disconnection_reason)
    SELECT lpad(to_hex(i), 24, '0'), ${account.user.id}, ${agentId}, 'Agent', 'phone', 'inbound', 'success',
      timestamptz '2026-01-01' + i * interval '1 hour', repeat('x', 2000)
    FROM generate_series(1, 6000) i`.execute(db)
}

async function get (url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) })
  return { status: res.status, headers: res.headers, body: await res.text() }
}

async function until<T> (what: string, probe: () => Promise<T | undefined>): Promise<T> {
  return await poll(probe, (value) => value !== undefined, { intervalMs: 0, message: `timed out waiting for ${what}` }) as T
}

t.test('twelve slow uploads hold no database connection: /health and other routes still answer', async (t) => {
  const { app, db } = await setup(t, { DATABASE_POOL_SIZE: '3', DATABASE_POOL_WAIT_MS: '3000', KB_UPLOADS_PER_ACCOUNT: '2' })
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  const port = Number(new URL(url).port)
  const accounts = await Promise.all(Array.from({ length: 6 }, async () => await createAccount(db)))
  const sockets: net.Socket[] = []
  t.teardown(() => { for (const socket of sockets) socket.destroy() })
  for (const account of accounts) sockets.push(await slowUpload(port, account), await slowUpload(port, account))

  // A third upload of an account whose two are under way: refused at once, told when to retry.
  const refused = await until('the per-account upload limit', async () => {
    const res = await fetch(`${url}/v1/knowledge-base`, { method: 'POST', headers: accounts[0].headers, body: new FormData(), signal: AbortSignal.timeout(10_000) })
    return res.status === 429 ? { headers: res.headers, body: await res.json() } : undefined
  })
  t.match(refused.body, { statusCode: 429, error: 'Too Many Requests', code: 'too_many_concurrent_uploads' })
  t.equal(refused.headers.get('retry-after'), '5')

  const health = await get(`${url}/health`)
  t.equal(health.status, 200, '/health answers while the uploads trickle')
  t.same(JSON.parse(health.body), { status: 'ok', database: 'up' })
  const agents = await get(`${url}/v1/agent/list`, accounts[5].headers)
  t.equal(agents.status, 200, 'another route answers too')
  t.equal((await db.selectFrom('knowledge_bases').select('id').execute()).length, 0, 'nothing is stored before an upload has arrived')
})

t.test('exports whose clients stop reading: a third of one account is refused, and other routes still answer', async (t) => {
  const { app, db } = await setup(t, {
    DATABASE_POOL_SIZE: '3', DATABASE_POOL_WAIT_MS: '3000', EXPORTS_PER_ACCOUNT: '2', EXPORTS_MAX: '2'
  })
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  const port = Number(new URL(url).port)
  const [reader, other] = await Promise.all([createAccount(db), createAccount(db)])
  const llm = (await app.inject({ method: 'POST', url: '/v1/llm', headers: reader.headers, payload: {} })).json()
  const agent = (await app.inject({ method: 'POST', url: '/v1/agent', headers: reader.headers, payload: { agent_name: 'A', llm_id: llm._id } })).json()
  await manyCalls(db, reader, agent._id)
  const query = 'date_from=2026-01-01&date_to=2026-12-31'
  const sockets = [await stalledExport(port, reader, query), await stalledExport(port, reader, query)]
  t.teardown(() => { for (const socket of sockets) socket.destroy() })

  const third = await until('the per-account export limit', async () => {
    const res = await fetch(`${url}/v1/call/list/export?date_from=2020-01-01&date_to=2020-01-01`, { headers: reader.headers, signal: AbortSignal.timeout(10_000) })
    return res.status === 429 ? { headers: res.headers, body: await res.json() } : (await res.text(), undefined)
  })
  t.match(third.body, { statusCode: 429, code: 'too_many_concurrent_exports' })
  t.equal(third.headers.get('retry-after'), '5')
  t.equal((await get(`${url}/health`)).status, 200, '/health answers while the downloads stall')
  t.equal((await get(`${url}/v1/agent/list`, other.headers)).status, 200, 'another route answers too')
})

t.test('an export whose client stops reading is cut off after EXPORT_STALL_TIMEOUT_MS: its connection and slot come back', async (t) => {
  const { app, db } = await setup(t, {
    DATABASE_POOL_SIZE: '3', EXPORTS_PER_ACCOUNT: '1', EXPORTS_MAX: '1', EXPORT_STALL_TIMEOUT_MS: '500'
  })
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  const port = Number(new URL(url).port)
  const reader = await createAccount(db)
  const agent = (await app.inject({ method: 'POST', url: '/v1/agent', headers: reader.headers, payload: { agent_name: 'A', llm_id: (await app.inject({ method: 'POST', url: '/v1/llm', headers: reader.headers, payload: {} })).json()._id } })).json()
  await manyCalls(db, reader, agent._id)
  const pool = poolOf(db)

  const { socket, head } = await headThenStall(port, reader, 'date_from=2026-01-01&date_to=2026-12-31')
  t.teardown(() => socket.destroy())
  t.match(head, /^HTTP\/1\.1 200 OK\r\n/, 'the export started')
  // HTTP_CONNECTION_TIMEOUT_MS (60 s) would close the socket much later: what frees the export here is its own limit.
  const again = await until('the stalled export to give its slot back', async () => {
    const res = await fetch(`${url}/v1/call/list/export?date_from=2026-01-01&date_to=2026-01-01`, { headers: reader.headers, signal: AbortSignal.timeout(10_000) })
    const body = await res.text()
    return res.status === 200 ? body : undefined
  })
  t.equal(again.trim().split('\n').length, 1 + 23, 'a new export of the same account runs to its end: a header and a day of calls')
  await until('the connection to come back to the pool', async () => pool.totalCount === pool.idleCount ? true : undefined)
  t.pass('no connection is checked out')
  t.equal((await get(`${url}/health`)).status, 200, '/health answers')
})

t.test('exports over EXPORTS_MAX answer 503 exports_busy with Retry-After', async (t) => {
  const { app, db } = await setup(t, { DATABASE_POOL_SIZE: '3', EXPORTS_PER_ACCOUNT: '2', EXPORTS_MAX: '1' })
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  const port = Number(new URL(url).port)
  const [reader, other] = await Promise.all([createAccount(db), createAccount(db)])
  const agent = (await app.inject({ method: 'POST', url: '/v1/agent', headers: reader.headers, payload: { agent_name: 'A', llm_id: (await app.inject({ method: 'POST', url: '/v1/llm', headers: reader.headers, payload: {} })).json()._id } })).json()
  await manyCalls(db, reader, agent._id)
  const { socket } = await headThenStall(port, reader, 'date_from=2026-01-01&date_to=2026-12-31')
  t.teardown(() => socket.destroy())

  const res = await fetch(`${url}/v1/call/list/export?date_from=2020-01-01&date_to=2020-01-01`, { headers: other.headers, signal: AbortSignal.timeout(10_000) })
  t.equal(res.status, 503, 'another account is refused while the process runs EXPORTS_MAX exports')
  t.equal(res.headers.get('retry-after'), '5')
  t.match(await res.json(), { statusCode: 503, error: 'Service Unavailable', code: 'exports_busy' })
})

t.test('a request that waits DATABASE_POOL_WAIT_MS for a connection answers 503 unavailable, logged as a warning', async (t) => {
  const lines: Array<Record<string, unknown>> = []
  const logger = pino({ level: 'info' }, { write: (line: string) => { lines.push(JSON.parse(line)) } })
  const { app, db } = await setup(t, { DATABASE_POOL_SIZE: '1', DATABASE_POOL_WAIT_MS: '200' }, { logger })
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  const port = Number(new URL(url).port)
  const reader = await createAccount(db)
  const agent = (await app.inject({ method: 'POST', url: '/v1/agent', headers: reader.headers, payload: { agent_name: 'A', llm_id: (await app.inject({ method: 'POST', url: '/v1/llm', headers: reader.headers, payload: {} })).json()._id } })).json()
  await manyCalls(db, reader, agent._id)
  // The export holds the pool's only connection while its client reads nothing.
  const { socket } = await headThenStall(port, reader, 'date_from=2026-01-01&date_to=2026-12-31')
  t.teardown(() => socket.destroy())

  const res = await fetch(`${url}/v1/agent/list`, { headers: reader.headers, signal: AbortSignal.timeout(10_000) })
  t.equal(res.status, 503)
  t.equal(res.headers.get('retry-after'), '1')
  t.match(await res.json(), { statusCode: 503, error: 'Service Unavailable', code: 'unavailable', message: 'the server is busy; retry in a second' })
  const line = lines.find((l) => l.msg === 'request refused: the server is busy')
  t.match(line, { level: 40, reason: 'timeout exceeded when trying to connect' }, 'logged at warn')
  t.notOk(line?.err, 'without an error and its stack')
  t.notOk(lines.some((l) => (l.level as number) >= 50), 'nothing at error level')
})
