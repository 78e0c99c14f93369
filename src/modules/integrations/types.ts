import type { IntegrationProvider } from '../../config.ts'

// The shapes the integrations module is made of, apart from what they do: the services' descriptors (providers/)
// and the client (client.ts) both use them.

export type Provider = IntegrationProvider

export type AuthMethod = 'api_key' | 'oauth'

export interface ApiRequest {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE'
  /** Appended to the provider's API URL (`/freeBusy`), or a full URL on the same origin (a pagination link). */
  path: string
  query?: Record<string, string | number | boolean | undefined>
  /** Sent as JSON. */
  body?: unknown
  /** The service's own headers (Cal.com's `cal-api-version`). */
  headers?: Record<string, string>
}

/** A 2xx answer: its status and its JSON (null when empty). */
export interface ApiAnswer { status: number, body: any }

export interface Connection {
  provider: Provider
  method: AuthMethod
  accountLabel: string
  /** Answers a 2xx; anything else throws an IntegrationError. */
  request: (req: ApiRequest, signal?: AbortSignal) => Promise<ApiAnswer>
}

export interface ProviderInfo {
  provider: Provider
  /** The service's own name, shown in the app. */
  service: string
  /** How an account connects, in order of preference. */
  methods: AuthMethod[]
  /** OAuth scopes asked for. */
  scopes: string[]
  /** Extra query members of the authorize URL (Google's `access_type=offline` for a refresh token). */
  authorizeParams?: Record<string, string>
  /** The cheap authenticated call made once on connect: answers the account's name shown in the app. */
  account: (conn: Connection, signal?: AbortSignal) => Promise<string>
}
