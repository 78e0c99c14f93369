import type { CallRow } from '../../db/schema.ts'
import { callPayload, QUERY_PAYLOAD_FIELDS } from '../calls/variables.ts'
import { MASK } from '../agents/settings-parts.ts'
import type { ShapedRequest } from '../capabilities/registry.ts'
import type { ApiCallSettings } from '../capabilities/types/api-call.ts'

// What a post-call delivery sends: the call payload of the specification's Events section, shaped by an
// api_call action's URL, query, body and headers with {{variables}}.

/** The agent webhook's request: the whole payload, POSTed. */
export function webhookRequest (url: string, call: CallRow): ShapedRequest {
  return { method: 'POST', url, body: callPayload(call) }
}

const configuredNames = (settings: ApiCallSettings) => [
  ...new URLSearchParams(/\?([^#]*)/.exec(settings.url)?.[1] ?? '').keys(),
  ...Object.keys(settings.query ?? {}),
  ...Object.keys(settings.body ?? {})
]

/**
 * A delivery's URL as answers show it. Query values are masked like header values (a key "in a query
 * parameter" is a credential), and so is a user name or password in the URL. Shown in clear are only the
 * call payload's fields that a GET or DELETE carries in its query string, when the action is known
 * (`settings`) and does not set a parameter of that name itself.
 */
export function displayUrl (url: string, method: string, settings: ApiCallSettings | undefined): string {
  const shown = new Set<string>(settings !== undefined && (method === 'GET' || method === 'DELETE') ? QUERY_PAYLOAD_FIELDS : [])
  if (settings !== undefined) for (const name of configuredNames(settings)) shown.delete(name)
  const parsed = new URL(url)
  if (parsed.username !== '') parsed.username = MASK
  if (parsed.password !== '') parsed.password = MASK
  if (parsed.search !== '') {
    const masked = new URLSearchParams()
    for (const [name, value] of parsed.searchParams) masked.append(name, shown.has(name) ? value : MASK)
    parsed.search = masked.toString()
  }
  return parsed.toString()
}

/**
 * A URL as displayUrl masks it (a user name, a password and every query value as `********`), for a URL that may
 * still hold {{variables}} and so need not parse: the URL as stored in an action or agent, shown to someone who may
 * only view it (a workspace member).
 */
export function maskUrlTemplate (template: string): string {
  const parts = /^([^:/?#]+:\/\/)(?:([^/?#@]*)@)?([^?#]*)(?:\?([^#]*))?(#.*)?$/.exec(template)
  if (parts === null) return MASK
  const [, scheme, userinfo, rest, query, fragment] = parts
  const credentials = userinfo === undefined ? '' : `${userinfo.includes(':') ? `${MASK}:${MASK}` : MASK}@`
  const masked = query === undefined ? '' : `?${query.split('&').map((pair) => `${pair.split('=')[0]}=${MASK}`).join('&')}`
  return `${scheme}${credentials}${rest}${masked}${fragment ?? ''}`
}

const maskValues = (values: Record<string, unknown> | undefined) => Object.fromEntries(Object.keys(values ?? {}).map((name) => [name, MASK]))

/**
 * An api_call action's settings as a workspace member sees them: what a delivery's URL masks, masked here too — the
 * URL's credentials and query values, the query parameters' values, and for GET and DELETE (which carry the body in
 * the query string) the body's values. Header values are write-only everywhere anyway.
 */
export function viewerApiCallSettings (settings: ApiCallSettings): ApiCallSettings {
  const inQuery = settings.method === 'GET' || settings.method === 'DELETE'
  return { ...settings, url: maskUrlTemplate(settings.url), query: maskValues(settings.query), ...(inQuery && { body: maskValues(settings.body) }) }
}
