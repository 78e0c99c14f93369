import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import type { Test } from 'tap'
import type { DB } from '../../src/db/database.ts'
import { hashPassword } from '../../src/modules/console/passwords.ts'
import { createApiKey, createUser, type User } from '../../src/modules/users/queries.ts'
import type { Account } from './app.ts'

/** A browser's view of the console through app.inject: it keeps cookies and reads forms' CSRF tokens. */
export class ConsoleClient {
  readonly app: FastifyInstance
  readonly cookies = new Map<string, string>()

  constructor (app: FastifyInstance) {
    this.app = app
  }

  #keep (res: LightMyRequestResponse): LightMyRequestResponse {
    for (const line of [res.headers['set-cookie'] ?? []].flat()) {
      const [pair] = line.split(';')
      const eq = pair.indexOf('=')
      const name = pair.slice(0, eq)
      if (/;\s*Max-Age=0/i.test(line)) this.cookies.delete(name)
      else this.cookies.set(name, pair.slice(eq + 1))
    }
    return res
  }

  get cookieHeader (): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ')
  }

  async get (url: string): Promise<LightMyRequestResponse> {
    return this.#keep(await this.app.inject({ method: 'GET', url, headers: { cookie: this.cookieHeader } }))
  }

  async post (url: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    return this.#keep(await this.app.inject({
      method: 'POST',
      url,
      headers: { cookie: this.cookieHeader, 'content-type': 'application/x-www-form-urlencoded', ...headers },
      payload: new URLSearchParams(form).toString()
    }))
  }

  /** Loads `url` and posts `form` with the page's CSRF token, as a person filling in the form would. */
  async submit (url: string, action: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    const page = await this.get(url)
    return await this.post(action, { csrf_token: csrfOf(page.body), ...form }, headers)
  }

  async signIn (email: string, password: string): Promise<LightMyRequestResponse> {
    return await this.submit('/login', '/login', { email, password })
  }
}

export function csrfOf (body: string): string {
  const token = /name="csrf_token" value="([^"]+)"/.exec(body)?.[1]
  if (token === undefined) throw new Error(`no CSRF token in the page:\n${body}`)
  return token
}

export const PASSWORD = 'correct horse battery'

let users = 0

/** A user with a password, ready to sign in. */
export async function createConsoleUser (db: DB, password = PASSWORD): Promise<User> {
  const user = await createUser(db, { email: `console${++users}-${Date.now()}@example.com` })
  await db.updateTable('users').set({ password_hash: await hashPassword(password) }).where('id', '=', user.id).execute()
  return user
}

/** The headers every console page carries (docs/console.md): no inline code, no framing, nothing cached. */
export const PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; media-src 'self'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store'
}

/** A console user who also has an API key (to make records through the API), signed in. */
export async function signedInWithKey (ctx: { app: FastifyInstance, db: DB }): Promise<{ user: User, account: Account, browser: ConsoleClient }> {
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  return { user, account: { user, key, headers: { 'x-api-key': key } }, browser }
}

const ENTITIES: Record<string, string> = { '&quot;': '"', '&#39;': '\'', '&lt;': '<', '&gt;': '>', '&amp;': '&' }

/** Text as the page escaped it, unescaped (what the browser shows or sends). */
export const unescapeHtml = (text: string) => text.replace(/&(quot|#39|lt|gt|amp);/g, (entity) => ENTITIES[entity])

/** The value of the first input named `name` in the page (as the browser would send it). */
export function inputValue (body: string, name: string): string {
  const found = new RegExp(`<input[^>]* name="${name}" value="([^"]*)"`).exec(body)
  if (found === null) throw new Error(`no input ${name} in the page`)
  return unescapeHtml(found[1])
}

/** A page without the layout's local-time script (pages.ts links it where a page shows a time): for tests that a page has no other script. */
export const withoutLocalTime = (body: string) => body.replace('<script src="/console/local-time.js" defer></script>', '')

/**
 * A refused form (Post/Redirect/Get, console/drafts.ts): `res` must be a 303 to `page` with `draft=<id>` added and
 * `#anchor`; answers that address without the fragment (what a reload asks for) and the page it shows.
 */
export async function followRefusal (browser: ConsoleClient, res: LightMyRequestResponse, page: string, anchor = 'form-problems'): Promise<{ url: string, page: LightMyRequestResponse }> {
  const location = res.headers.location
  const expected = `${page}${page.includes('?') ? '&' : '?'}draft=`
  if (res.statusCode !== 303 || typeof location !== 'string' || !location.startsWith(expected) || !new RegExp(`^[0-9a-f]{24}#${anchor}$`).test(location.slice(expected.length))) {
    throw new Error(`not refused with a redirect to ${page}: ${res.statusCode} ${String(location)}\n${res.body.slice(0, 2000)}`)
  }
  const url = location.replace(/#.*$/, '')
  const shown = await browser.get(url)
  // Every link of the error summary leads to something on the page (a field, a group, a table).
  const summary = /<div id="form-problems"[^>]*>([\s\S]*?)<\/div>/.exec(shown.body)?.[1] ?? ''
  for (const [, target] of summary.matchAll(/href="#([^"]+)"/g)) {
    if (!shown.body.includes(`id="${target}"`)) throw new Error(`the error summary links #${target}, which is not on ${url}`)
  }
  return { url, page: shown }
}

/**
 * Post/Redirect/Get of a refused form (console/drafts.ts): the POST `res` answered 303 to `page?draft=<id>#<anchor>`,
 * and that address shows each text of `shows` (the values sent, the problem in words) at a first view and at a reload.
 * Returns the draft's address without its fragment.
 */
export async function followDraft (t: Test, browser: ConsoleClient, res: LightMyRequestResponse, page: string, shows: Array<string | RegExp>, anchor = 'form-problems'): Promise<string> {
  const { url, page: first } = await followRefusal(browser, res, page, anchor)
  t.pass('the refused POST redirects to the form\'s page with its draft, never a page at its own address')
  for (const view of ['first view', 'reload']) {
    const shown = view === 'first view' ? first : await browser.get(url)
    t.equal(shown.statusCode, 200, view)
    for (const text of shows) t.match(shown.body, text, `${view}: ${text}`)
  }
  return url
}

/** Another session of the user `email` (its own cookies): it cannot read the first session's drafts. */
export async function anotherSession (app: FastifyInstance, email: string): Promise<ConsoleClient> {
  const other = new ConsoleClient(app)
  await other.signIn(email, PASSWORD)
  return other
}
