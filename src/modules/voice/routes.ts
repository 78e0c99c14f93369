import { readFileSync } from 'node:fs'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Logger } from 'pino'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import { KEYLESS } from '../../http/rate-limit.ts'
import { errors } from '../../http/schemas.ts'
import type { Mailer } from '../../mail/mailer.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { findAgent } from '../agents/queries.ts'
import { spendAccessToken } from '../calls/queries.ts'
import { hashToken } from '../users/keys.ts'
import { callOfToken, JoinDetails, joinDetails, ownOrigins, streamOriginAllowed } from './join.ts'
import type { LiveCalls } from './live-calls.ts'
import { Session } from './session.ts'
import type { StreamAdmission } from './streams.ts'
import { CLOSE } from './socket-loop.ts'
import { browserStream } from './transports/browser.ts'

// The routes a browser reaches without an API key (docs/voice.md): joining a web call with its access
// token, the call's stream, the client script and a page that uses it. Everything else is under /v1.

const TAGS = ['web calls']

const file = (name: string) => readFileSync(new URL(`./web/${name}`, import.meta.url))
const ASSETS: Record<string, { type: string, body: Buffer }> = {
  'client.js': { type: 'text/javascript; charset=utf-8', body: file('client.js') },
  'worklet.js': { type: 'text/javascript; charset=utf-8', body: file('worklet.js') },
  'page.js': { type: 'text/javascript; charset=utf-8', body: file('page.js') },
  'page.css': { type: 'text/css; charset=utf-8', body: file('page.css') },
  // The call's controls, also used by the console's "Talk to this agent".
  'panel.js': { type: 'text/javascript; charset=utf-8', body: file('panel.js') },
  'panel.css': { type: 'text/css; charset=utf-8', body: file('panel.css') }
}
const PAGE = file('page.html')

// The page runs only its own scripts and talks only to this server; no other site may frame it.
const PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; media-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer'
}

// The client and its worklets are loaded by the website widget from other sites' pages, as modules (CORS mode).
const ASSET_HEADERS = {
  'cache-control': 'no-cache',
  'x-content-type-options': 'nosniff',
  'access-control-allow-origin': '*',
  'cross-origin-resource-policy': 'cross-origin'
}

const JOIN_CORS = { 'access-control-allow-origin': '*' }

const tokenOf = (request: FastifyRequest) => (request.query as { access_token: string }).access_token

export const webCallRoutes: FastifyPluginAsyncTypebox<{ db: DB, jobs: JobSender, log: Logger, mailer: Mailer, live: LiveCalls, streams: StreamAdmission }> = async (app, { db, jobs, log, mailer, live, streams }) => {
  const { config } = jobs

  app.post('/web-call/join', {
    config: KEYLESS,
    // Before validation, so that a page of another site reads every answer, refusals included.
    onRequest: async (_request, reply) => { void reply.headers(JOIN_CORS) },
    schema: {
      tags: TAGS,
      summary: 'Join a web call with its access token',
      description: 'What a browser needs before it opens the call\'s stream (`GET /web-call/stream?access_token=…`, a WebSocket; docs/voice.md).',
      security: [],
      body: Type.Object({ access_token: Type.String({ minLength: 1, maxLength: 100 }) }),
      response: {
        200: JoinDetails,
        ...errors(400, 403)
      }
    }
  }, async (request) => await joinDetails(db, config, request.body.access_token))

  // The website widget joins from other sites' pages (docs/widget.md): the token is the credential and no cookie is
  // involved, so any page may ask; the stream then checks the page's origin against the agent's allowed_origins.
  app.options('/web-call/join', { schema: { hide: true } }, async (_request, reply) => {
    return reply.code(204).headers({ ...JOIN_CORS, 'access-control-allow-methods': 'POST', 'access-control-allow-headers': 'content-type', 'access-control-max-age': '600' }).send()
  })

  // Checked before the upgrade, so that a refused stream is a plain HTTP answer the browser can read; after the
  // query's validation (a preHandler), so that it reads one string (`?access_token=a&access_token=b` is a 400).
  async function admit (request: FastifyRequest, _reply: FastifyReply): Promise<void> {
    const call = await callOfToken(db, tokenOf(request))
    if (call.runtime !== 'voice') throw new HttpError(409, 'not_a_voice_call', `this call is held by the ${call.runtime} runtime, not the built-in voice engine (CALL_RUNTIME)`)
    const agent = await findAgent(db, call.user_id, call.agent_id)
    if (agent === undefined) throw new HttpError(403, 'invalid_access_token', 'the call\'s agent no longer exists')
    if (!streamOriginAllowed(agent, request.headers.origin, ownOrigins(config, request))) {
      throw new HttpError(403, 'origin_not_allowed', 'this site may not open the agent\'s calls: add its origin to the agent\'s widget_settings.allowed_origins')
    }
  }

  app.get('/web-call/stream', {
    websocket: true,
    config: KEYLESS,
    // The stream's place first (per address and process, before any lookup), then its token and origin.
    onRequest: streams.admit,
    preHandler: admit,
    schema: { hide: true, querystring: Type.Object({ access_token: Type.String({ minLength: 1, maxLength: 100 }) }) }
  }, async (socket, request) => {
    const { streamTimeoutMs: timeoutMs, streamStartTimeoutMs: startTimeoutMs } = config.voice
    const stream = browserStream(socket, {
      timeoutMs,
      startTimeoutMs,
      started: () => streams.started(request),
      refused: (problem) => request.log.warn({ problem }, 'a web call stream failed')
    })
    const call = await spendAccessToken(db, hashToken(tokenOf(request)))
    if (call === undefined) return stream.loop.refuse(CLOSE.forbidden, 'invalid_access_token', 'the access token was spent by another stream')
    const session = Session.open({ db, log, mailer, ...jobs }, call, stream.transport)
    live.add(session)
    stream.attach(session)
  })

  for (const [name, asset] of Object.entries(ASSETS)) {
    app.get(`/web-call/${name}`, { schema: { hide: true } }, async (_request, reply) => {
      return reply.type(asset.type).headers(ASSET_HEADERS).send(asset.body)
    })
  }

  app.get('/web-call', { schema: { hide: true } }, async (_request, reply) => {
    return reply.type('text/html; charset=utf-8').headers(PAGE_HEADERS).header('cache-control', 'no-cache').send(PAGE)
  })
}
