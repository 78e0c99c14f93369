import { createHash, randomBytes } from 'node:crypto'
import type { Logger } from 'pino'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { openSecret, sealSecret } from '../../db/secrets.ts'
import { HttpError } from '../../http/errors.ts'
import { hashToken } from '../users/keys.ts'
import type { Provider } from './queries.ts'

// The OAuth 2.0 connect flow (docs/integrations.md, "Connecting an account"): the authorization code grant with
// PKCE (S256). A pending authorization is a row of oauth_states: the state is kept only as a hash, the PKCE
// verifier sealed with the secrets key; the row is bound to the console session that started it (or, from the
// API, to the API key's account alone), lives 10 minutes and is deleted by the first callback that names it.

/** How long a pending authorization waits for the provider's callback. */
export const STATE_TTL_MS = 10 * 60_000

/** Where every provider sends the browser back: PUBLIC_BASE_URL + this (registered in each provider's console). */
export const CALLBACK_PATH = '/integrations/oauth/callback'

export const redirectUriOf = (config: Pick<Config, 'publicBaseUrl'>) => `${config.publicBaseUrl}${CALLBACK_PATH}`

/** A PKCE verifier (43 characters of 32 random bytes, RFC 7636 4.1) and its S256 challenge. */
export function pkcePair (): { verifier: string, challenge: string } {
  const verifier = randomBytes(32).toString('base64url')
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') }
}
