import type { Static } from 'typebox'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import type { JobSender } from '../../jobs/queues.ts'
import type { AgentRow } from '../agents/queries.ts'
import { WIDGET_SETTINGS_DEFAULTS } from '../agents/schemas.ts'
import { startWebCall } from '../calls/web-calls.ts'
import { generateToken } from '../users/keys.ts'
import { allowedOrigins, joinDetails, originListed, type JoinDetails } from '../voice/join.ts'
import { takeHourly } from '../../db/budgets.ts'
import { findKeyOwner, findWidgetAgent } from './queries.ts'

// The website widget (docs/widget.md): one script tag shows a call button on a site and holds a web call through
// the browser protocol. A site with a backend hands the widget make-web-call's access token; a site without one
// uses the agent's public widget key, which starts web calls of that agent only, only while its widget is enabled,
// only from the agent's allowed_origins, and at most WIDGET_CALLS_PER_ADDRESS_HOUR per client address and hour.

export const WIDGET_KEY_PATTERN = /^wk_[A-Za-z0-9]{32}$/

export const newWidgetKey = (): string => generateToken('wk_', 32)

/** The agent's widget settings with their defaults. */
export const widgetSettings = (agent: Pick<AgentRow, 'widget_settings'>) => ({ ...WIDGET_SETTINGS_DEFAULTS, ...agent.widget_settings })

/** The tag a site pastes into its pages: with the key when there is one, else with the site's own token endpoint. */
export function widgetSnippet (publicBaseUrl: string, agentId: string, key: string | undefined): string {
  const auth = key === undefined ? 'data-token-url="/your-backend/switchboard-token"' : `data-widget-key="${key}"`
  return `<script src="${publicBaseUrl}/widget.js" data-agent-id="${agentId}" ${auth} defer></script>`
}

/** Why the widget cannot take calls with its key, in words for the console; undefined when it can. */
export function keyProblem (agent: Pick<AgentRow, 'widget_settings' | 'status'>): string | undefined {
  if (!widgetSettings(agent).enabled) return 'The widget is off: turn on "Offer the web-call widget" below, or every site is refused.'
  if (allowedOrigins(agent).length === 0) return 'No site may use the key: add your site\'s origin to "Sites that may embed it" below (a public key usable from any site would let any site start calls on your account).'
  if (agent.status !== 'active') return 'The agent is inactive: it takes no calls.'
  return undefined
}

/**
 * The agent's widget as a page of `origin` may see it (the button's look), or the reason it may not: the agent's id
 * is public (it is in the snippet), so an unknown agent and a widget switched off answer alike. A page of a site the
 * agent does not list is refused when the agent lists any (the stream would refuse it too); a request without an
 * Origin (not a browser's page) is answered.
 */
export async function publicWidget (db: DB, agentId: string, origin: string | undefined) {
  const agent = await findWidgetAgent(db, agentId)
  if (agent === undefined || !widgetSettings(agent).enabled) throw new HttpError(403, 'widget_disabled', 'this agent offers no website widget: turn on its widget_settings.enabled')
  const allowed = allowedOrigins(agent)
  if (origin !== undefined && allowed.length > 0 && !originListed(allowed, origin)) throw originRefused()
  const { theme, primary_color: primaryColor, position, greeting } = widgetSettings(agent)
  return { agent_id: agent.id, agent_name: agent.agent_name, theme, primary_color: primaryColor, position, greeting, allowed_origins_set: allowed.length > 0 }
}

const originRefused = () => new HttpError(403, 'origin_not_allowed', 'this site may not start calls with this agent: add its origin to the agent\'s widget_settings.allowed_origins')

/** Whether a page of `origin` may call the agent's key route: the agent lists it (a key needs a list). */
export async function keyOriginAllowed (db: DB, agentId: string, origin: string | undefined): Promise<boolean> {
  const agent = await findWidgetAgent(db, agentId)
  return agent !== undefined && originListed(allowedOrigins(agent), origin)
}

export interface WidgetCallRequest { agentId: string, key: string | undefined, origin: string | undefined, address: string }

export type WidgetCallStarted = Static<typeof JoinDetails> & { access_token: string, access_token_expires_at: number }

/**
 * Starts a web call with an agent's public widget key and answers what the browser needs to open its stream, or how
 * long the client's address must wait when it has used its calls of the hour. Every check comes before the call is
 * counted against the address, and the count before the call is stored.
 */
export async function startWidgetCall (db: DB, jobs: JobSender, request: WidgetCallRequest): Promise<{ started: WidgetCallStarted } | { retryAfterSeconds: number }> {
  if (request.key === undefined) throw new HttpError(401, 'missing_widget_key', 'the x-widget-key header is missing: give the agent\'s widget key (POST /v1/agent/:id/widget-key)')
  const owner = WIDGET_KEY_PATTERN.test(request.key) ? await findKeyOwner(db, request.key) : undefined
  if (owner === undefined || owner.agent_id !== request.agentId.toLowerCase()) throw new HttpError(403, 'invalid_widget_key', 'the widget key is unknown, was rotated or deleted, or belongs to another agent')
  const agent = await findWidgetAgent(db, owner.agent_id)
  if (agent === undefined || !widgetSettings(agent).enabled) throw new HttpError(403, 'widget_disabled', 'the agent\'s website widget is off (widget_settings.enabled is false): its widget key starts no calls')
  const allowed = allowedOrigins(agent)
  if (allowed.length === 0) {
    throw new HttpError(403, 'widget_origins_required', 'the agent\'s widget_settings.allowed_origins is empty, so its public widget key works on no site: a key usable from any site would let anyone start calls on your account. Add the origins of the sites that embed the widget')
  }
  if (!originListed(allowed, request.origin)) throw originRefused()
  const taken = await takeHourly(db, `widget:${owner.agent_id}:${request.address}`, jobs.config.widgetCallsPerAddressHour)
  if (!taken.taken) return { retryAfterSeconds: taken.retryAfterSeconds }
  const pin = widgetSettings(agent).agent_version ?? undefined
  const call = await startWebCall(db, jobs, owner.user_id, { agent_id: owner.agent_id, agent_version: pin, custom_data: { source: 'widget', origin: request.origin } })
  return { started: { ...await joinDetails(db, jobs.config, call.access_token), access_token: call.access_token, access_token_expires_at: call.access_token_expires_at } }
}
