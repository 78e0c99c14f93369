import { readFileSync } from 'node:fs'
import { Type } from 'typebox'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import type { DB } from '../../db/database.ts'
import type { JobSender } from '../../jobs/queues.ts'
import type { Mailer } from '../../mail/mailer.ts'
import type { Carriers } from '../phone-numbers/carriers/index.ts'
import type { DeliveryDeps } from '../deliveries/engine.ts'
import { HttpError, type AjvIssue, type NotFoundPage } from '../../http/errors.ts'
import { clientAddress, KEYLESS } from '../../http/rate-limit.ts'
import { checkText } from '../../http/validation.ts'
import { listAgents } from '../agents/queries.ts'
import { forgetApiKeys } from '../users/auth.ts'
import { createApiKey, listApiKeys, MAX_ACTIVE_KEYS, revokeKeyOfUser } from '../users/queries.ts'
import { consoleAgentTestRoutes } from './agent-tests.ts'
import { consoleCapabilityRoutes } from './agent-capabilities.ts'
import { consoleAgentKnowledgeRoutes } from './agent-knowledge.ts'
import { consoleAgentTemplateRoutes } from './agent-templates.ts'
import { consoleAgentRoutes } from './agents.ts'
import { consoleVersionRoutes } from './agent-versions.ts'
import { consoleWorkflowRoutes } from './agent-workflow.ts'
import { consoleAnalyticsRoutes } from './analytics.ts'
import { consoleCallRoutes } from './calls.ts'
import { consoleCampaignRoutes } from './campaigns.ts'
import { consoleAppointmentRoutes } from './appointments.ts'
import { consoleContactRoutes } from './contacts.ts'
import { consoleDoNotCallRoutes } from './do-not-call.ts'
import { consoleCustomerRoutes } from './customers.ts'
import { consoleDeliveryRoutes } from './deliveries.ts'
import { consoleIntegrationRoutes } from './integrations.ts'
import { consoleKnowledgeBaseRoutes } from './knowledge-bases.ts'
import { consoleWorkspaceRoutes, INVITATION_ROUTE, type SignIn } from './workspaces.ts'
import { consolePhoneNumberRoutes } from './phone-numbers.ts'
import { consoleTestPhoneCallRoutes } from './test-phone-call.ts'
import { consoleVoicePreviewRoutes } from './voice-picker.ts'
import { keysPage, messagePage, passwordPage, signInPage, viewerOf } from './pages.ts'
import { hashPassword, hashSlots, MAX_PASSWORD_LENGTH, passwordProblem, verifyNothing, verifyPassword } from './passwords.ts'
import {
  createSession, deleteSession, findSession, findSignIn, giveBackAttempt, LINK_GRACE_MS, newSecret, passwordHashOf,
  reserveAttempt, SESSION_MAX_MS, setPassword, spendLoginLink, type ConsoleSession
} from './queries.ts'
import { scopeOf } from './scope.ts'
import { consoleSettingsRoutes } from './settings.ts'
import { consoleSubscriptionRoutes } from './subscription.ts'
import { afterSignIn, HOME, LOGIN_CSRF_COOKIE, originAllowed, PAGE_HEADERS, parseCookies, sameToken, serializeCookie, SESSION_COOKIE, sessionOf } from './security.ts'
import { formBody, idParams, NOT_FOUND_TEXT, page, schemaProblem, sendPage, text } from './reply.ts'

declare module 'fastify' {
  interface FastifyRequest {
    /** The console session of the request's cookie, when it is live. */
    consoleSession: ConsoleSession | undefined
  }
  interface FastifyContextConfig {
    /**
     * A multipart form (an upload): its handler checks the CSRF token itself, as the form's first field and
     * before any file is read (knowledge-bases.ts), since the body is not parsed before the handler.
     */
    multipartForm?: true
  }
}

// Failed sign-ins counted over 15 minutes: 10 per e-mail address stops guessing one account's password; a
// client address gets more, since an office behind one address holds many people who mistype. An attempt is
// counted before its password is checked (reserveAttempt), and a success gives it back.
export const FAILURE_WINDOW_MS = 15 * 60_000
export const MAX_FAILURES_PER_EMAIL = 10
export const MAX_FAILURES_PER_ADDRESS = 30

/** Whole seconds (at least one) until a refused attempt may try again. */
const retryIn = (ms: number) => Math.max(1, Math.ceil(ms / 1000))

const FORM_LIMIT = 16 * 1024

// The forms of this file (their lengths the handlers check, answering on the form itself).
// `next` is a path of this site (afterSignIn): a longer one is no link of the console's.
const NEXT = text('The page to open after signing in', { maxLength: 2000 })
const SIGN_IN_FORM = formBody({ email: text('The e-mail address'), password: text('The password'), next: NEXT })
const PASSWORD_FORM = formBody({ current_password: text('The current password'), new_password: text('The new password'), confirm_password: text('The repeated new password') })
const CSS = readFileSync(new URL('./static/console.css', import.meta.url))

/** An answer meant for the person at the browser, rendered as a page by the console's error handler. */
class PageError extends Error {
  readonly statusCode: number
  readonly title: string

  constructor (statusCode: number, title: string, message: string) {
    super(message)
    this.statusCode = statusCode
    this.title = title
  }
}

/** A form field as text: '' when missing or not a string (a JSON body, a repeated field). */
function field (request: FastifyRequest, name: string): string {
  const value = (request.body as Record<string, unknown> | undefined)?.[name]
  return typeof value === 'string' ? value : ''
}

/** The live console session of the request's cookie, if any. */
async function sessionOfCookie (db: DB, request: FastifyRequest): Promise<ConsoleSession | undefined> {
  const id = parseCookies(request.headers.cookie).get(SESSION_COOKIE)
  return id === undefined || id === '' ? undefined : await findSession(db, id)
}

/** An unknown address a browser opens: the console's 404 page, inside the layout for a signed-in person. */
export const consoleNotFound = (db: DB): NotFoundPage => async (request, reply) => {
  const session = await sessionOfCookie(db, request)
  return sendPage(reply.headers(PAGE_HEADERS), 404,
    messagePage('Page not found', NOT_FOUND_TEXT, session && viewerOf(session)))
}

/**
 * The web console (docs/console.md): sign-in by password or one-time link, sessions in PostgreSQL behind an
 * HttpOnly cookie, a CSRF token in every form, and the pages, which call the modules' functions directly.
 */
export async function consoleRoutes (app: FastifyInstance, options: { db: DB, publicBaseUrl: string, jobs: JobSender, mailer: Mailer, carriers: Carriers, deliveries: DeliveryDeps }): Promise<void> {
  const { db, publicBaseUrl, jobs, mailer, carriers, deliveries } = options
  const secure = publicBaseUrl.startsWith('https:')
  const sessionCookie = (value: string, maxAgeSeconds: number) => serializeCookie(SESSION_COOKIE, value, { maxAgeSeconds, secure })

  app.addHook('onRequest', async (_request, reply) => { reply.headers(PAGE_HEADERS) })

  // Errors of a console route are pages, not the API's JSON; 5xx text is logged, never shown. A route schema's
  // refusal (reply.ts, page()) says in words what was wrong; a bad id in the address is the 404 page.
  app.setErrorHandler((err: FastifyError | HttpError | PageError, request, reply) => {
    const viewer = request.consoleSession && viewerOf(request.consoleSession)
    if (err instanceof PageError) return sendPage(reply, err.statusCode, messagePage(err.title, err.message, viewer))
    const validation = (err as { validation?: AjvIssue[] }).validation
    if (validation !== undefined && validation.length > 0) {
      const context = (err as FastifyError).validationContext
      const input = context === 'body' ? request.body : context === 'querystring' ? request.query : request.params
      const { status, message } = schemaProblem(context, validation, request.routeOptions.schema as Record<string, unknown> | undefined, input)
      return sendPage(reply, status, messagePage(status === 404 ? 'Page not found' : 'That did not work', message, viewer))
    }
    const status = err.statusCode ?? 500
    if (status < 500) return sendPage(reply, status, messagePage('That did not work', err instanceof HttpError ? err.message : 'The request could not be read.', viewer))
    request.log.error({ err }, 'console request failed')
    return sendPage(reply, 500, messagePage('Something went wrong', `It was logged with request id ${request.id}. Try again in a moment.`, viewer))
  })

  app.get('/console/console.css', page(), async (_request, reply) => {
    return reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=3600').send(CSS)
  })

  await app.register(async (pages) => {
    // Forms only: a page's POST is a form; a JSON body (which a plain cross-site form cannot send anyway) answers 415.
    pages.removeAllContentTypeParsers()
    pages.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT }, (_request, body, done) => {
      try {
        const form: Record<string, string> = {}
        for (const [name, value] of new URLSearchParams(body as string)) form[name] ??= checkText(value, `the field ${checkText(name, 'a field name')}`)
        done(null, form)
      } catch (err) {
        done(err as Error)
      }
    })
    pages.decorateRequest('consoleSession', undefined)

    pages.addHook('onRequest', async (request) => {
      if (request.method === 'POST' && !originAllowed(request.headers.origin, publicBaseUrl, request.headers.host)) {
        throw new PageError(403, 'Refused', 'This form was sent from another site. Open the console at its own address and try again.')
      }
      request.consoleSession = await sessionOfCookie(db, request)
    })

    // Every POST carries the CSRF token: the session's, or before sign-in the one of the form's cookie (the sign-in
    // form always; an invitation's form when nobody is signed in).
    pages.addHook('preHandler', async (request) => {
      if (request.method !== 'POST' || request.routeOptions.config.multipartForm === true) return
      const route = request.routeOptions.url
      const cookieToken = () => parseCookies(request.headers.cookie).get(LOGIN_CSRF_COOKIE)
      const expected = route === '/login'
        ? cookieToken()
        : request.consoleSession?.csrfToken ?? (route === INVITATION_ROUTE ? cookieToken() : undefined)
      if (!sameToken(field(request, 'csrf_token'), expected)) {
        throw new PageError(403, 'Refused', request.consoleSession === undefined && route !== '/login' && route !== INVITATION_ROUTE
          ? 'You are signed out. Sign in and try again.'
          : 'This form has expired. Reload the page and send it again.')
      }
    })

    /** A new session (a new id: rotation) replaces whatever session the browser had. */
    const signIn: SignIn = async (request, reply, userId, options) => {
      if (request.consoleSession !== undefined) await deleteSession(db, request.consoleSession.idHash)
      const { id } = await createSession(db, userId, options)
      reply.header('set-cookie', sessionCookie(id, SESSION_MAX_MS / 1000))
      reply.header('set-cookie', serializeCookie(LOGIN_CSRF_COOKIE, '', { path: '/login', maxAgeSeconds: 0, secure }))
    }

    pages.get('/', page(), async (request, reply) => reply.redirect(request.consoleSession === undefined ? '/login' : HOME, 303))

    pages.get<{ Querystring: { next?: string } }>('/login', page({ querystring: Type.Object({ next: NEXT }) }), async (request, reply) => {
      const next = afterSignIn(request.query.next)
      if (request.consoleSession !== undefined) return reply.redirect(next, 303)
      const token = parseCookies(request.headers.cookie).get(LOGIN_CSRF_COOKIE) ?? newSecret()
      reply.header('set-cookie', serializeCookie(LOGIN_CSRF_COOKIE, token, { path: '/login', secure }))
      return sendPage(reply, 200, signInPage({ csrfToken: token, next }))
    })

    /**
     * Runs `check` (which hashes a password) in one of the hash slots of the client's address, or refuses at once
     * with `refuse` when the address (429) or the process (503) has all of them.
     */
    async function withHashSlot (request: FastifyRequest, reply: FastifyReply, refuse: (status: number, error: string) => FastifyReply, check: () => Promise<FastifyReply>) {
      const slot = hashSlots.tryTake(clientAddress(request.ip))
      if (typeof slot !== 'function') {
        reply.header('retry-after', '1')
        return slot === 'key'
          ? refuse(429, 'Too many sign-ins from your address at once. Try again in a moment.')
          : refuse(503, 'The server is checking as many passwords as it can. Try again in a moment.')
      }
      try {
        return await check()
      } finally {
        slot()
      }
    }

    pages.post('/login', page({ body: SIGN_IN_FORM }, { config: KEYLESS }), async (request, reply) => {
      const email = field(request, 'email').trim()
      const password = field(request, 'password')
      const csrfToken = field(request, 'csrf_token')
      const next = afterSignIn(field(request, 'next') || undefined)
      const refuse = (status: number, error: string) => sendPage(reply, status, signInPage({ csrfToken, email, next, error }))
      return await withHashSlot(request, reply, refuse, async () => {
        const account = email === '' || email.length > 320 || password.length > MAX_PASSWORD_LENGTH ? undefined : await findSignIn(db, email)
        const emailBucket = { bucket: `email:${email.toLowerCase().slice(0, 320)}`, max: MAX_FAILURES_PER_EMAIL }
        const addressBucket = { bucket: `address:${clientAddress(request.ip)}`, max: MAX_FAILURES_PER_ADDRESS }
        // Failures for e-mail addresses without a password count per e-mail but not per client address: made-up
        // addresses cannot use up the budget of the people who sign in from there. They are refused all the same
        // when that budget is used up, so that a refusal does not tell who has an account.
        const hash = account?.passwordHash ?? null
        const reserved = hash === null
          ? await reserveAttempt(db, [emailBucket], FAILURE_WINDOW_MS, [addressBucket])
          : await reserveAttempt(db, [emailBucket, addressBucket], FAILURE_WINDOW_MS)
        if ('retryAfterMs' in reserved) {
          const seconds = retryIn(reserved.retryAfterMs)
          reply.header('retry-after', String(seconds))
          return refuse(429, `Too many failed sign-ins. Try again in ${Math.ceil(seconds / 60)} minutes, or sign in with a one-time link.`)
        }
        const valid = hash === null ? await verifyNothing(password) : await verifyPassword(password, hash)
        if (!valid) return refuse(401, 'The e-mail address or the password is wrong.')
        await giveBackAttempt(db, reserved.ids)
        await signIn(request, reply, account!.userId, { viaLink: false })
        return reply.redirect(next, 303)
      })
    })

    pages.get<{ Params: { token: string } }>('/login/link/:token', page({ params: Type.Object({ token: Type.String() }) }, { config: KEYLESS }), async (request, reply) => {
      const userId = await spendLoginLink(db, request.params.token)
      if (userId === undefined) {
        throw new PageError(404, 'This link does not work', 'The sign-in link is unknown, was used already, or is older than 15 minutes. Ask for a new one: npm run cli -- user login-link --email <address>')
      }
      await signIn(request, reply, userId, { viaLink: true })
      return reply.redirect('/account/password', 303)
    })

    pages.post('/logout', page({ body: formBody({}) }), async (request, reply) => {
      await deleteSession(db, request.consoleSession!.idHash)
      reply.header('set-cookie', sessionCookie('', 0))
      return reply.redirect('/login', 303)
    })

    /** Whether changing the password needs the current one: not right after a sign-in by link. */
    const needsCurrent = (session: ConsoleSession) =>
      session.hasPassword && !(session.viaLink && Date.now() - session.createdAt.getTime() < LINK_GRACE_MS)

    pages.get('/account/password', page(), async (request, reply) => {
      const session = sessionOf(request, reply)
      if (session === undefined) return reply
      return sendPage(reply, 200, passwordPage({ viewer: viewerOf(session), hasPassword: session.hasPassword, needsCurrent: needsCurrent(session) }))
    })

    pages.post('/account/password', page({ body: PASSWORD_FORM }), async (request, reply) => {
      const session = request.consoleSession!
      const viewer = viewerOf(session)
      const refuse = (status: number, error: string) =>
        sendPage(reply, status, passwordPage({ viewer, hasPassword: session.hasPassword, needsCurrent: needsCurrent(session), error }))
      const next = field(request, 'new_password')
      return await withHashSlot(request, reply, refuse, async () => {
        if (needsCurrent(session)) {
          // The same limit as sign-in: a browser left signed in must not become a way to guess the password.
          const reserved = await reserveAttempt(db, [{ bucket: `email:${session.email.toLowerCase()}`, max: MAX_FAILURES_PER_EMAIL }], FAILURE_WINDOW_MS)
          if ('retryAfterMs' in reserved) {
            const seconds = retryIn(reserved.retryAfterMs)
            reply.header('retry-after', String(seconds))
            return refuse(429, `Too many wrong passwords. Try again in ${Math.ceil(seconds / 60)} minutes.`)
          }
          const current = field(request, 'current_password')
          const stored = await passwordHashOf(db, session.userId)
          if (stored === null || current.length > MAX_PASSWORD_LENGTH || !await verifyPassword(current, stored)) {
            return refuse(400, 'The current password is wrong.')
          }
          await giveBackAttempt(db, reserved.ids)
        }
        const problem = passwordProblem(next) ?? (next !== field(request, 'confirm_password') ? 'The two new passwords differ.' : undefined)
        if (problem !== undefined) return refuse(400, problem)
        await setPassword(db, session.userId, await hashPassword(next), session.idHash)
        const scope = scopeOf(session)
        const firstAgent = scope.canChange && (await listAgents(db, scope.ownerId, { limit: 1, workspace_id: scope.workspaceId })).length === 0
        return sendPage(reply, 200, passwordPage({ viewer, hasPassword: true, needsCurrent: true, done: firstAgent ? 'first-agent' : 'agents' }))
      })
    })

    const activeKeys = async (userId: string) => (await listApiKeys(db, userId)).filter((key) => key.revoked_at === null)

    pages.get('/keys', page(), async (request, reply) => {
      const session = sessionOf(request, reply)
      if (session === undefined) return reply
      return sendPage(reply, 200, keysPage({ viewer: viewerOf(session), keys: await activeKeys(session.userId), max: MAX_ACTIVE_KEYS }))
    })

    pages.post('/keys', page({ body: formBody({ name: text('The name') }) }), async (request, reply) => {
      const session = request.consoleSession!
      const viewer = viewerOf(session)
      const name = field(request, 'name').trim()
      const refuse = async (status: number, error: string) =>
        sendPage(reply, status, keysPage({ viewer, keys: await activeKeys(session.userId), max: MAX_ACTIVE_KEYS, error }))
      if (name.length > 100) return await refuse(400, 'The name may be at most 100 characters long.')
      let created
      try {
        created = await createApiKey(db, session.userId, { name })
      } catch (err) {
        if (err instanceof HttpError && err.code === 'key_limit_reached') return await refuse(409, `You have ${MAX_ACTIVE_KEYS} active keys already: revoke one first.`)
        throw err
      }
      // The key itself is in this answer only (never stored, never in a URL); a reload of /keys shows its prefix.
      return sendPage(reply, 201, keysPage({ viewer, keys: await activeKeys(session.userId), max: MAX_ACTIVE_KEYS, created: { key: created.key, name } }))
    })

    pages.post<{ Params: { id: string } }>('/keys/:id/revoke', page({ params: idParams('id'), body: formBody({}) }), async (request, reply) => {
      if (!await revokeKeyOfUser(db, request.consoleSession!.userId, request.params.id)) {
        throw new PageError(404, 'No such key', 'You have no active API key with that id.')
      }
      forgetApiKeys()
      return reply.redirect('/keys', 303)
    })

    await pages.register(consoleAgentRoutes, { db, jobs })
    await pages.register(consoleAgentTemplateRoutes, { db })
    await pages.register(consoleAgentKnowledgeRoutes, { db })
    await pages.register(consoleVersionRoutes, { db })
    await pages.register(consoleCallRoutes, { db, limits: jobs.config.concurrency })
    await pages.register(consoleContactRoutes, { db })
    await pages.register(consoleDoNotCallRoutes, { db })
    await pages.register(consoleCampaignRoutes, { db, jobs })
    await pages.register(consoleAppointmentRoutes, { db, config: jobs.config, log: app.log, mailer })
    await pages.register(consoleWorkspaceRoutes, { db, mailer, publicBaseUrl, signIn })
    await pages.register(consolePhoneNumberRoutes, { db, jobs, carriers })
    await pages.register(consoleTestPhoneCallRoutes, { db, jobs })
    await pages.register(consoleVoicePreviewRoutes, { db, config: jobs.config })
    await pages.register(consoleCustomerRoutes, { db })
    await pages.register(consoleSubscriptionRoutes, { db })
    await pages.register(consoleSettingsRoutes, { db, config: jobs.config })
    await pages.register(consoleIntegrationRoutes, { db, config: jobs.config, log: app.log as Logger })
    await pages.register(consoleAnalyticsRoutes, { db, limits: jobs.config.concurrency })
    await pages.register(consoleDeliveryRoutes, { deliveries })
    await pages.register(consoleKnowledgeBaseRoutes, { db, jobs })
    await pages.register(consoleCapabilityRoutes, { deliveries })
    await pages.register(consoleAgentTestRoutes, { deps: { ...jobs, db, log: app.log as Logger, mailer } })
    await pages.register(consoleWorkflowRoutes, { db })
  })
}
