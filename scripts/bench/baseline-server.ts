// The benchmarks' reference point: a bare Fastify route doing one primary-key select through pg, nothing
// else (no auth, no schemas). Started as its own process on DATABASE_URL and PORT.
import Fastify from 'fastify'
import pg from 'pg'

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 })
const app = Fastify()
app.get('/calls/:id', async (request) => {
  const { rows } = await pool.query('SELECT * FROM calls WHERE id = $1', [(request.params as { id: string }).id])
  return rows[0] ?? null
})
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' })
process.stdout.write('ready\n')
process.on('SIGTERM', () => { void app.close().then(() => pool.end()).then(() => process.exit(0)) })
