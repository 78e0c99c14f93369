import net from 'node:net'
import t from 'tap'
import { createAccount, setup, type Account } from '../helpers/app.ts'

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

async function get (url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) })
  return { status: res.status, headers: res.headers, body: await res.text() }
}

async function until<T> (what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 20_000
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setImmediate(resolve))
  }
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
