import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { HttpError, notFound } from '../../http/errors.ts'
import { clientAddress, KEYLESS } from '../../http/rate-limit.ts'
import { AUTH_ERRORS, EpochMs, errors, IdParams, Nullable, ObjectId } from '../../http/schemas.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { agentExists } from '../agents/queries.ts'
import { JoinDetails } from '../voice/join.ts'
import { deleteWidgetKey, findWidgetKey, putWidgetKey, type WidgetKey } from './queries.ts'
import { keyOriginAllowed, newWidgetKey, publicWidget, startWidgetCall, widgetSnippet } from './widget.ts'

// The website widget's routes (docs/widget.md): its key, managed with the account's API key, and what the widget's
// script reaches from other sites' pages without one.

const TAGS = ['widget']

const WidgetKeyView = Type.Object({
  agent_id: ObjectId,
  widget_key: Nullable(Type.String({ description: 'wk_…: public by design; it starts web calls of this agent only, from its allowed_origins, a few per client address and hour' })),
  created_at: Nullable(EpochMs),
  snippet: Type.String({ description: 'the script tag to paste into a site\'s pages: with the key, or with data-token-url when there is none' })
})

/** The agent's key and its snippet, managed with the account's API key (registered under /v1). */
export const widgetKeyRoutes: FastifyPluginAsyncTypebox<{ db: DB, publicBaseUrl: string }> = async (app, { db, publicBaseUrl }) => {
  const view = (agentId: string, key: WidgetKey | undefined) => ({
    agent_id: agentId.toLowerCase(),
    widget_key: key?.key ?? null,
    created_at: key?.created_at.getTime() ?? null,
    snippet: widgetSnippet(publicBaseUrl, agentId.toLowerCase(), key?.key)
  })

  app.get('/agent/:id/widget-key', {
    schema: {
      tags: TAGS,
      summary: 'Get the agent\'s widget key',
      description: '`widget_key` is null until one is created. The snippet is the script tag that shows the widget on a site (docs/widget.md).',
      params: IdParams,
      response: { 200: WidgetKeyView, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const { id } = request.params
    if (!await agentExists(db, request.userId, id)) throw notFound(`agent ${id}`)
    return view(id, await findWidgetKey(db, request.userId, id))
  })

  app.post('/agent/:id/widget-key', {
    schema: {
      tags: TAGS,
      summary: 'Create or rotate the agent\'s widget key',
      description: 'A new public key for the website widget; the agent\'s previous key stops working at once. It starts calls only while `widget_settings.enabled` is true and only from pages of `widget_settings.allowed_origins` (an empty list refuses every site).',
      params: IdParams,
      response: { 201: WidgetKeyView, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    const { id } = request.params
    const key = await putWidgetKey(db, request.userId, id, newWidgetKey())
    if (key === undefined) throw notFound(`agent ${id}`)
    return reply.code(201).send(view(id, key))
  })

  app.delete('/agent/:id/widget-key', {
    schema: {
      tags: TAGS,
      summary: 'Delete the agent\'s widget key',
      description: 'The key stops working at once; sites that embed the widget with it can no longer start calls. Deleting when there is no key changes nothing.',
      params: IdParams,
      response: { 204: Type.Null(), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    const { id } = request.params
    if (!await agentExists(db, request.userId, id)) throw notFound(`agent ${id}`)
    await deleteWidgetKey(db, request.userId, id)
    return reply.code(204).send(null)
  })
}

const SCRIPT = readFileSync(new URL('./web/widget.js', import.meta.url))
const SCRIPT_ETAG = `"${createHash('sha256').update(SCRIPT).digest('base64url').slice(0, 22)}"`

// Sites load the script on every page: browsers and CDNs keep it a while, then ask again with its ETag.
const SCRIPT_HEADERS = {
  'content-type': 'text/javascript; charset=utf-8',
  'cache-control': 'public, max-age=300',
  etag: SCRIPT_ETAG,
  'x-content-type-options': 'nosniff',
  'access-control-allow-origin': '*',
  'cross-origin-resource-policy': 'cross-origin'
}

const AgentParams = Type.Object({ agent_id: ObjectId })

const PublicWidget = Type.Object({
  agent_id: ObjectId,
  agent_name: Type.String(),
  theme: Type.String(),
  primary_color: Type.String(),
  position: Type.String(),
  greeting: Type.String(),
  allowed_origins_set: Type.Boolean({ description: 'the agent lists the sites that may embed it; a widget key works only then' })
})

const KEY_CORS = { 'access-control-allow-methods': 'POST', 'access-control-allow-headers': 'x-widget-key', 'access-control-max-age': '600' }

/** What the widget's script reaches without an API key, from any site's pages: the script, the look, the key's calls. */
export const widgetPublicRoutes: FastifyPluginAsyncTypebox<{ db: DB, jobs: JobSender }> = async (app, { db, jobs }) => {
  app.get('/widget.js', { schema: { hide: true } }, async (request, reply) => {
    void reply.headers(SCRIPT_HEADERS)
    if (request.headers['if-none-match'] === SCRIPT_ETAG) return reply.code(304).send()
    return reply.send(SCRIPT)
  })

  app.get('/v1/widget/:agent_id', {
    config: KEYLESS,
    // Any page may read the look of an enabled widget, refusals included (they say what to fix).
    onRequest: async (_request, reply) => { void reply.header('access-control-allow-origin', '*') },
    schema: {
      tags: TAGS,
      summary: 'The widget\'s look',
      description: 'What the widget\'s script shows (no API key): the agent\'s name and its `widget_settings` but `allowed_origins`. `403 widget_disabled` when the widget is off or there is no such agent; `403 origin_not_allowed` for a page of a site the agent does not list, when it lists any.',
      security: [],
      params: AgentParams,
      response: { 200: PublicWidget, ...errors(400, 403) }
    }
  }, async (request) => await publicWidget(db, request.params.agent_id, request.headers.origin))

  // The preflight of the key route: only a page of a site the agent lists may send it the key.
  app.options('/v1/widget/:agent_id/call', {
    config: KEYLESS,
    schema: { hide: true, params: AgentParams }
  }, async (request, reply) => {
    const { origin } = request.headers
    void reply.header('vary', 'origin')
    if (!await keyOriginAllowed(db, request.params.agent_id, origin)) throw new HttpError(403, 'origin_not_allowed', 'this site may not start calls with this agent\'s widget key: add its origin to the agent\'s widget_settings.allowed_origins')
    return reply.code(204).headers({ ...KEY_CORS, 'access-control-allow-origin': origin! }).send()
  })

  app.post('/v1/widget/:agent_id/call', {
    config: KEYLESS,
    schema: {
      tags: TAGS,
      summary: 'Start a web call with the agent\'s widget key',
      description: 'For the website widget on a site without a backend (docs/widget.md): the agent\'s public key in `x-widget-key`, from a page of one of its `widget_settings.allowed_origins` (the `Origin` header), while its widget is enabled, at most `WIDGET_CALLS_PER_ADDRESS_HOUR` calls per client address and hour. Answers what `POST /web-call/join` answers and the call\'s access token: the browser then opens `stream_path`.',
      security: [],
      params: AgentParams,
      headers: Type.Object({ 'x-widget-key': Type.Optional(Type.String({ maxLength: 200, description: 'the agent\'s widget key (wk_…)' })) }),
      response: {
        201: Type.Object({ ...JoinDetails.properties, access_token: Type.String(), access_token_expires_at: EpochMs }),
        ...errors(400, 401, 403, 409, 429)
      }
    }
  }, async (request, reply) => {
    const { origin } = request.headers
    void reply.header('vary', 'origin')
    // The page's own site reads every answer, refusals included; other sites read none (as their preflight).
    if (await keyOriginAllowed(db, request.params.agent_id, origin)) void reply.header('access-control-allow-origin', origin)
    const outcome = await startWidgetCall(db, jobs, { agentId: request.params.agent_id, key: request.headers['x-widget-key'], origin, address: clientAddress(request.ip) })
    if ('retryAfterSeconds' in outcome) {
      void reply.header('retry-after', String(outcome.retryAfterSeconds))
      throw new HttpError(429, 'widget_rate_limited', `this address has started the most calls with this widget an hour allows (${jobs.config.widgetCallsPerAddressHour}); retry in ${outcome.retryAfterSeconds} s`)
    }
    return reply.code(201).send(outcome.started)
  })
}
