import type { FastifyInstance } from 'fastify'
import { Type, type Static } from 'typebox'
import type { Logger } from 'pino'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import { toolsSwitchedOff } from '../agents/versions.ts'
import { TOOLS } from '../capabilities/catalog.ts'
import {
  CALLBACK_PATH, connectWithKey, disconnect, finishAuthorization, integrationStates, startAuthorization, type FailedReason, type IntegrationState
} from '../integrations/connect.ts'
import { PROVIDER_INFO, PROVIDERS, type Provider } from '../integrations/providers.ts'
import { DRAFT_QUERY, FORM_PROBLEM, draftOf, formSaved, refuseForm } from './drafts.ts'
import { describe, formOf } from './fields.ts'
import { html, type SafeHtml } from './html.ts'
import { csrfField, layout, messagePage, notice, viewerOf, when, type Viewer } from './pages.ts'
import { PAGE_HEADERS, sessionOf } from './security.ts'
import { KEYLESS } from '../../http/rate-limit.ts'
import { formBody, NOT_FOUND_TEXT, page, sendPage, text } from './reply.ts'

// The console's Integrations page (docs/integrations.md): each provider with its service, status and account, a
// Connect button for OAuth (a POST that starts the authorization and sends the browser to the provider), a form for
// an API key or token, Disconnect with the number of tools it switches off, and the OAuth callback every provider
// sends the browser back to.

const PAGE = '/integrations'

/** What a key form asks for, in the service's own words. */
const KEY_LABELS: Partial<Record<Provider, { label: string, noun: string, hint: string }>> = {
  booking_one: { label: 'Cal.com API key', noun: 'key', hint: 'Cal.com → Settings → Developer → API keys (starts with cal_live_).' },
  booking_two: { label: 'Calendly personal access token', noun: 'token', hint: 'Calendly → Integrations & apps → API & Webhooks → Personal access tokens.' },
  crm: { label: 'HubSpot service key', noun: 'key', hint: 'HubSpot → Development → Keys → Service keys, with the contacts read and write scopes (or a legacy private app\'s access token).' }
}

/** Why an OAuth round trip did not connect, as the page says it; the callback names one in its redirect. */
const FAILED: Record<FailedReason, (service: string, detail: string) => string> = {
  denied: (service) => `${service} was not connected: access was not allowed on ${service}'s page.`,
  provider_error: (service, detail) => `${service} answered with an error (${detail || 'no reason given'}); nothing was connected. Try again.`,
  missing_code: (service) => `${service} sent the browser back without an authorization code; nothing was connected. Try again.`,
  unknown_state: () => 'This return from the service was used already, or belongs to no connection started here; nothing was connected. Start again with Connect.',
  expired: (service) => `The connection to ${service} took longer than 10 minutes; nothing was connected. Start again with Connect.`,
  other_session: (service) => `The connection to ${service} was started in another browser or session; nothing was connected. Start again with Connect here.`,
  token_failed: (service, detail) => `${service} refused the authorization code (${detail || 'no reason given'}); nothing was connected. Try again.`,
  unreachable: (service) => `${service} could not be reached to finish the connection; nothing was connected. Try again in a moment.`,
  account_failed: (service, detail) => `${service} did not answer the account check (${detail || 'no reason given'}); nothing was connected. Try again.`
}

const isProvider = (text: unknown): text is Provider => typeof text === 'string' && (PROVIDERS as readonly string[]).includes(text)

// An unknown provider in the address is the 404 page (the schema's refusal).
const PROVIDER = Type.Object({ provider: Type.Union(PROVIDERS.map((provider) => Type.Literal(provider))) })
// What the redirects of this page put in its query (noticeOf); the callback's, what a provider sends back.
const PAGE_QUERY = Type.Object({
  connected: text('The connected service'), disconnected: text('The disconnected service'), tools: text('The tools switched off'),
  failed: text('The reason'), provider: text('The service'), detail: text('The detail'), draft: DRAFT_QUERY
})
const CALLBACK_QUERY = Type.Object({ state: text('The state'), code: text('The code'), error: text('The error') })
// Where the callback sends an authorization started through the API that did not connect (its reason in the query).
const NOT_CONNECTED_PATH = '/integrations/oauth/not-connected'
const NOT_CONNECTED_QUERY = Type.Object({ failed: text('The reason'), provider: text('The service'), detail: text('The detail') })

/** The tools a provider's account serves: the label of the tool type of the same name. */
const toolsLabel = (provider: Provider) => TOOLS.types[provider]?.label ?? provider

const STATUS_TEXT = { not_connected: 'Not connected', connected: 'Connected', revoked: 'Access revoked or expired: reconnect' } as const
const METHOD_TEXT = { oauth: 'OAuth (signed in at the service)', api_key: 'API key or token' } as const

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`

/** The page's notice: what the last action did (from the redirect's query), or a form's error. */
interface PageNotice { kind: 'success' | 'error', text: string }

interface KeyForm { provider: Provider, problem: string }

/** A refused key's problem is kept under its field's id (the key itself is never kept nor written back). */
const keyField = (provider: Provider) => `${provider}-api_key`

function providerSection (viewer: Viewer, state: IntegrationState, keyForm: KeyForm | undefined): SafeHtml {
  const { provider, service } = state
  const id = `integration-${provider}`
  const connected = state.status !== 'not_connected'
  const oauth = state.methods.includes('oauth')
  const key = KEY_LABELS[provider]
  const keyProblem = keyForm?.provider === provider ? keyForm.problem : undefined
  const field = describe(keyField(provider), key?.hint, keyProblem)
  return html`<section aria-labelledby="${id}-title" class="integration">
<h2 id="${id}-title">${service}</h2>
<p class="hint">Used by the ${toolsLabel(provider)} tools.</p>
<dl class="facts">
  <dt>Status</dt><dd id="${id}-status">${STATUS_TEXT[state.status]}</dd>
  ${state.status === 'revoked' && state.statusReason !== null && html`<dt>Why</dt><dd>${state.statusReason}</dd>`}
  ${connected && html`<dt>Account</dt><dd id="${id}-account">${state.accountLabel === '' ? '—' : state.accountLabel}</dd>
  <dt>Connected with</dt><dd>${state.method === null ? '—' : METHOD_TEXT[state.method]}</dd>
  <dt>Connected</dt><dd>${when(state.connectedAt)}</dd>`}
  <dt>Active tools</dt><dd>${plural(state.activeTools, 'tool uses it', 'tools use it')}</dd>
</dl>
${state.status !== 'connected' && oauth && (state.oauthConfigured
  ? html`<form method="post" action="/integrations/${provider}/connect">${csrfField(viewer.csrfToken)}<button type="submit">${state.status === 'revoked' ? `Reconnect ${service}` : `Connect ${service}`}</button></form>`
  : html`<p id="${id}-unconfigured">${key === undefined ? 'Connecting' : `Signing in at ${service}`} with OAuth is not configured on this installation. Whoever runs the server sets
  ${state.clientVariables.map((name, i) => html`${i > 0 && ' and '}<code>${name}</code>`)} (docs/integrations.md explains each step)${key !== undefined && `; until then, connect with a ${key.noun}`}.</p>`)}
${state.status !== 'connected' && key !== undefined && html`<form method="post" action="/integrations/${provider}/key" class="stack">${csrfField(viewer.csrfToken)}
  <label for="${provider}-api_key">${key.label}</label>
  <input id="${provider}-api_key" name="api_key" type="password" autocomplete="off" required maxlength="2000"${field.attrs}>
  ${field.after}
  <button type="submit">${oauth ? `Connect ${service} with the ${key.noun}` : `Connect ${service}`}</button>
</form>`}
${connected && html`<form method="post" action="/integrations/${provider}/disconnect">${csrfField(viewer.csrfToken)}
  <p>Disconnecting deletes the stored ${state.method === 'oauth' ? 'tokens, revokes them at the service where it allows,' : 'credentials'} and switches off
  ${plural(state.activeTools, 'tool', 'tools')} that ${state.activeTools === 1 ? 'uses' : 'use'} it.</p>
  <button type="submit" class="danger">Disconnect ${service}</button>
</form>`}
</section>`
}

export function integrationsPage (viewer: Viewer, states: IntegrationState[], options: { notice?: PageNotice, keyForm?: KeyForm } = {}): string {
  return layout({
    title: 'Integrations',
    viewer,
    current: PAGE,
    body: html`
<p>The external accounts that your agents' calendar, booking and CRM tools act on during calls. Tokens and keys are
stored encrypted, refreshed before they expire and never shown again. Disconnecting switches the tools that use an
account off; they keep their settings.</p>
${options.notice !== undefined && notice(options.notice.kind, options.notice.text)}
${states.map((state) => providerSection(viewer, state, options.keyForm))}`
  })
}

/**
 * The page's CSP with form-action widened to the configured authorization servers: Chromium applies form-action to
 * the redirect that follows a form's POST, and Connect's answer is a 303 to the provider's authorize page.
 */
function pageHeaders (states: IntegrationState[]): Record<string, string> {
  const origins = [...new Set(states.flatMap((state) => state.authorizeOrigin === undefined ? [] : [state.authorizeOrigin]))]
  return origins.length === 0
    ? {}
    : { 'content-security-policy': PAGE_HEADERS['content-security-policy'].replace("form-action 'self'", `form-action 'self' ${origins.join(' ')}`) }
}

/** The notice of the page a redirect lands on: `?connected=`, `?disconnected=&tools=`, `?failed=&provider=&detail=`. */
function noticeOf (query: Static<typeof PAGE_QUERY>, states: IntegrationState[]): PageNotice | undefined {
  const serviceOf = (provider: unknown) => states.find((state) => state.provider === provider)?.service
  const cut = (value: string | undefined) => value?.slice(0, 200) ?? ''
  if (isProvider(query.connected)) {
    const state = states.find((s) => s.provider === query.connected)!
    return { kind: 'success', text: `${state.service} is connected${state.accountLabel === '' ? '' : ` as ${state.accountLabel}`}.` }
  }
  if (isProvider(query.disconnected)) {
    const tools = Number(cut(query.tools)) || 0
    return { kind: 'success', text: `${serviceOf(query.disconnected)} is disconnected; ${plural(tools, 'tool was', 'tools were')} switched off.` }
  }
  const text = failedText(query, serviceOf)
  return text === undefined ? undefined : { kind: 'error', text }
}

/** Why a connection failed, from a redirect's `?failed=&provider=&detail=` (undefined for a reason it does not know). */
function failedText (query: Static<typeof NOT_CONNECTED_QUERY>, serviceOf: (provider: unknown) => string | undefined): string | undefined {
  const cut = (value: string | undefined) => value?.slice(0, 200) ?? ''
  const reason = cut(query.failed) as FailedReason
  if (!Object.hasOwn(FAILED, reason)) return undefined
  return FAILED[reason](serviceOf(query.provider) ?? 'The service', /^[\w .:-]*$/.test(cut(query.detail)) ? cut(query.detail) : '')
}

export async function consoleIntegrationRoutes (app: FastifyInstance, { db, config, log }: { db: DB, config: Config, log: Logger }): Promise<void> {
  const deps = { db, config, log }

  app.get<{ Querystring: Static<typeof PAGE_QUERY> }>(PAGE, page({ querystring: PAGE_QUERY }), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const [states, draft] = await Promise.all([integrationStates(deps, session.userId), draftOf(db, session, PAGE, request.query.draft)])
    // A refused form's draft: a key's problem (at its field) or a refused Connect or Disconnect (the page's notice).
    const refused = draft?.problems[FORM_PROBLEM]
    const keyProvider = PROVIDERS.find((provider) => draft?.problems[keyField(provider)] !== undefined)
    const shown: PageNotice | undefined = refused !== undefined ? { kind: 'error', text: refused } : noticeOf(request.query, states)
    const keyForm = keyProvider === undefined ? undefined : { provider: keyProvider, problem: draft!.problems[keyField(keyProvider)] }
    return sendPage(reply.headers(pageHeaders(states)), 200, integrationsPage(viewerOf(session), states, { notice: shown, keyForm }))
  })

  app.post<{ Params: { provider: Provider } }>('/integrations/:provider/connect', page({ params: PROVIDER, body: formBody({}) }), async (request, reply) => {
    const session = request.consoleSession!
    const { provider } = request.params
    try {
      const { authorizationUrl } = await startAuthorization(deps, { userId: session.userId, sessionIdHash: session.idHash }, provider)
      return reply.redirect(authorizationUrl, 303)
    } catch (err) {
      if (!(err instanceof HttpError) || err.statusCode === 500) throw err
      return await refuseForm(db, reply, session, PAGE, {}, { [FORM_PROBLEM]: err.message }, 'main')
    }
  })

  app.post<{ Params: { provider: Provider } }>('/integrations/:provider/key', page({ params: PROVIDER, body: formBody({ api_key: text('The key or token') }) }), async (request, reply) => {
    const session = request.consoleSession!
    const { provider } = request.params
    const { api_key: apiKey } = formOf(request, ['api_key'])
    if (apiKey.trim() === '' || apiKey.length > 2000) {
      return await refuseForm(db, reply, session, PAGE, {}, { [keyField(provider)]: 'Paste the key or token (at most 2,000 characters).' }, keyField(provider))
    }
    try {
      await connectWithKey(deps, session.userId, provider, { apiKey: apiKey.trim() })
    } catch (err) {
      if (!(err instanceof HttpError) || err.statusCode === 500) throw err
      return await refuseForm(db, reply, session, PAGE, {}, { [keyField(provider)]: err.message }, keyField(provider))
    }
    await formSaved(db, session, PAGE)
    return reply.redirect(`${PAGE}?connected=${provider}`, 303)
  })

  app.post<{ Params: { provider: Provider } }>('/integrations/:provider/disconnect', page({ params: PROVIDER, body: formBody({}) }), async (request, reply) => {
    const session = request.consoleSession!
    const { provider } = request.params
    const outcome = await disconnect(deps, session.userId, provider, toolsSwitchedOff)
    if (outcome === undefined) return await refuseForm(db, reply, session, PAGE, {}, { [FORM_PROBLEM]: 'That integration is not connected.' }, 'main')
    return reply.redirect(`${PAGE}?disconnected=${provider}&tools=${outcome.toolsSwitchedOff}`, 303)
  })

  // Every provider sends the browser back here. A state started in the console must come back in the same session;
  // one started through the API (an integrator's user) ends on a plain page, whoever is signed in. It spends a
  // token without needing a session, so it is counted per client address as the sign-in link is.
  app.get<{ Querystring: Static<typeof CALLBACK_QUERY> }>(CALLBACK_PATH, page({ querystring: CALLBACK_QUERY }, { config: KEYLESS }), async (request, reply) => {
    const { state, code, error } = request.query
    const outcome = await finishAuthorization(deps, {
      state,
      code,
      error,
      sessionIdHash: request.consoleSession?.idHash
    })
    if (outcome.viaApi && outcome.ok) {
      const viewer = request.consoleSession && viewerOf(request.consoleSession)
      return sendPage(reply, 200, messagePage(`${outcome.service} is connected`, `${outcome.service} is connected to the Switchboard account${outcome.accountLabel === '' ? '' : ` as ${outcome.accountLabel}`}. You can close this window.`, viewer))
    }
    if (outcome.ok) return reply.redirect(`${PAGE}?connected=${outcome.provider}`, 303)
    // A failure is said on the page the browser is sent to, so that a reload says it again (the state is spent).
    const params = new URLSearchParams({ failed: outcome.reason, ...(outcome.provider === undefined ? {} : { provider: outcome.provider }), ...(outcome.detail === '' ? {} : { detail: outcome.detail }) })
    return reply.redirect(`${outcome.viaApi ? NOT_CONNECTED_PATH : PAGE}?${params.toString()}`, 303)
  })

  app.get<{ Querystring: Static<typeof NOT_CONNECTED_QUERY> }>(NOT_CONNECTED_PATH, page({ querystring: NOT_CONNECTED_QUERY }), async (request, reply) => {
    const text = failedText(request.query, (provider) => isProvider(provider) ? PROVIDER_INFO[provider].service : undefined)
    if (text === undefined) throw new HttpError(404, 'not_found', NOT_FOUND_TEXT)
    return sendPage(reply, 200, messagePage('Not connected', text, request.consoleSession && viewerOf(request.consoleSession)))
  })
}
