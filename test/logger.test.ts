import { execFile } from 'node:child_process'
import path from 'node:path'
import { Writable } from 'node:stream'
import { promisify } from 'node:util'
import pino from 'pino'
import t from 'tap'
import { ConfigError, loadConfig } from '../src/config.ts'
import { formatPretty, logFormat, serializeRequest } from '../src/logger.ts'
import { createLoginLink } from '../src/modules/console/queries.ts'
import { generateToken } from '../src/modules/users/keys.ts'
import { createAccount, setup } from './helpers/app.ts'
import { createTestDatabase } from './helpers/database.ts'

const ROOT = path.resolve(import.meta.dirname, '..')

t.test('a PostgreSQL error is logged with its names and code, without the data around it', async (t) => {
  const url = await createTestDatabase(t)
  // A real pg error with everything PostgreSQL can attach, logged by createLogger in a process of its own.
  const script = `
    import pg from 'pg'
    import { createLogger } from ${JSON.stringify(path.join(ROOT, 'src/logger.ts'))}
    const client = new pg.Client(process.env.URL)
    await client.connect()
    const err = await client.query(\`DO $$ BEGIN RAISE EXCEPTION 'duplicate key' USING ERRCODE = '23505',
      DETAIL = 'Key (email)=(ada@example.com) already exists.', TABLE = 'users', COLUMN = 'email',
      CONSTRAINT = 'users_email_key', SCHEMA = 'public'; END $$\`).catch((e) => e)
    await client.end()
    createLogger({ logLevel: 'info', logFormat: 'json' }).error({ err }, 'query failed')`
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, env: { ...process.env, URL: url } })
  const { err } = JSON.parse(stdout) as { err: Record<string, unknown> }
  t.match(err, { type: 'DatabaseError', message: 'duplicate key', code: '23505', severity: 'ERROR', schema: 'public', table: 'users', column: 'email', constraint: 'users_email_key' })
  t.match(err.stack, /^error: duplicate key\n/)
  t.same(Object.keys(err).sort(), ['code', 'column', 'constraint', 'message', 'schema', 'severity', 'stack', 'table', 'type'], 'no where, detail, internalQuery, position, file, line or routine')
  t.notMatch(stdout, /ada@example\.com|PL\/pgSQL/)
})

t.test('LOG_FORMAT: json or pretty, else pretty on a terminal only', async (t) => {
  t.equal(loadConfig({}).logFormat, undefined)
  t.equal(loadConfig({ LOG_FORMAT: 'pretty' }).logFormat, 'pretty')
  t.equal(loadConfig({ LOG_FORMAT: 'json' }).logFormat, 'json')
  t.throws(() => loadConfig({ LOG_FORMAT: 'xml' }), new ConfigError('LOG_FORMAT must be one of json, pretty, got "xml"'))
  t.equal(logFormat({ logLevel: 'info', logFormat: 'pretty' }), 'pretty')
  t.equal(logFormat({ logLevel: 'info' }), process.stdout.isTTY ? 'pretty' : 'json', 'the test runner pipes stdout: json')
})

t.test('pretty lines: time, level, request, message, fields, and an error stack below', async (t) => {
  const time = new Date(2026, 0, 2, 3, 4, 5).getTime()
  t.equal(formatPretty(JSON.stringify({ level: 30, time, pid: 1, hostname: 'h', reqId: 'r', res: { statusCode: 201 }, responseTime: 12.4, msg: 'request completed' }), false),
    '03:04:05 INFO  201 12 ms request completed\n')
  t.equal(formatPretty(JSON.stringify({ level: 50, time, msg: 'job failed', queue: 'call-analyse', err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at x' } }), false),
    '03:04:05 ERROR job failed queue=call-analyse\n    Error: boom\n        at x\n')
  t.equal(formatPretty(JSON.stringify({ level: 30, time, msg: 'listening', banner: ['Switchboard listening', '', 'Docs  /docs'] }), false),
    '\n  Switchboard listening\n\n  Docs  /docs\n\n')
  t.equal(formatPretty('not json', false), 'not json\n', 'anything else passes through')
})

t.test('tokens in a URL\'s path or query never reach the log: invitations, sign-in links, web calls, recording links', async (t) => {
  const lines: string[] = []
  const logger = pino({ level: 'info', serializers: { req: serializeRequest } }, new Writable({ write (chunk, _encoding, done) { lines.push(String(chunk)); done() } }))
  const { app, db } = await setup(t, { CALL_RUNTIME: 'voice' }, { logger })
  const { user } = await createAccount(db)
  const signInLink = await createLoginLink(db, user.id)
  const invitation = generateToken('wi_')
  const webCall = generateToken('wct_')
  const signature = 'Zm9yZ2VkLXNpZ25hdHVyZS1vZi1hLXJlY29yZGluZy1saW5r'
  const urls = {
    [`/login/link/${signInLink}`]: '/login/link/sl_[redacted]',
    [`/invitations/${invitation}`]: '/invitations/wi_[redacted]',
    [`/invitations/${invitation}?x=1`]: '/invitations/wi_[redacted]?x=1',
    [`/login?next=%2Finvitations%2F${invitation}`]: '/login?next=%2Finvitations%2Fwi_[redacted]',
    [`/web-call/stream?access_token=${webCall}`]: '/web-call/stream?access_token=[redacted]',
    [`/web-call/stream?x=1&access_token=${webCall}`]: '/web-call/stream?x=1&access_token=[redacted]',
    [`/v1/recordings/0123456789abcdef01234567.wav?expires=1&signature=${signature}`]: '/v1/recordings/0123456789abcdef01234567.wav?expires=1&signature=[redacted]'
  }
  for (const url of Object.keys(urls)) await app.inject({ method: 'GET', url })
  const logged = lines.map((line) => JSON.parse(line) as { req?: { url: string } }).flatMap((entry) => entry.req === undefined ? [] : [entry.req.url])
  t.same(logged, Object.values(urls), 'each request line with its tokens masked')
  for (const secret of [signInLink, invitation, webCall, signature, signInLink.slice(3), invitation.slice(3)]) t.notMatch(lines.join(''), secret)
})
