import Fastify, { type RouteOptions } from 'fastify'
import t from 'tap'
import { loadConfig } from '../../src/config.ts'
import type { DB } from '../../src/db/database.ts'
import { registerValidation } from '../../src/http/validation.ts'
import type { JobSender } from '../../src/jobs/queues.ts'
import type { Mailer } from '../../src/mail/mailer.ts'
import type { DeliveryDeps } from '../../src/modules/deliveries/engine.ts'
import type { Carriers } from '../../src/modules/phone-numbers/carriers/index.ts'
import { consoleRoutes } from '../../src/modules/console/routes.ts'
import { setup } from '../helpers/app.ts'
import { ConsoleClient, createConsoleUser, csrfOf, PASSWORD } from '../helpers/console-client.ts'

// Every console route declares its schema as the API's routes do (reply.ts, page()): the address's ids, the query
// string (GET) and the form (POST). A refusal is a page that says in words what was wrong; a bad id in the address
// is the 404 page.

/** The console's routes as registered, without building the rest of the app (no database is reached). */
async function consoleRouteList (): Promise<RouteOptions[]> {
  const config = loadConfig({ DATABASE_URL: 'postgres://127.0.0.1:1/none', LOG_LEVEL: 'silent', SECRETS_KEY: 'a'.repeat(64) })
  const app = Fastify()
  registerValidation(app)
  const routes: RouteOptions[] = []
  app.addHook('onRoute', (route) => { routes.push(route) })
  await app.register(consoleRoutes, {
    db: {} as DB, publicBaseUrl: 'http://127.0.0.1', jobs: { config } as JobSender, mailer: {} as Mailer, carriers: {} as Carriers, deliveries: {} as DeliveryDeps
  })
  await app.ready()
  await app.close()
  return routes.filter((route) => route.method !== 'HEAD')
}

t.test('every console route declares its schema: ids, query string, form', async (t) => {
  const routes = await consoleRouteList()
  t.ok(routes.length > 60, `${routes.length} routes walked`)
  for (const route of routes) {
    const schema = route.schema as Record<string, unknown> | undefined
    const name = `${String(route.method)} ${route.url}`
    t.equal(schema?.hide, true, `${name}: out of OpenAPI`)
    const parts = ['querystring', ...route.url!.includes(':') ? ['params'] : [], ...route.method === 'POST' ? ['body'] : []]
    const lacks = parts.filter((part) => schema?.[part] === undefined)
    if (lacks.length > 0) t.fail(`${name} declares no ${lacks.join(', ')}: use page() from console/reply.ts`)
  }
})

t.test('a schema\'s refusal is a page in words: a bad id is the 404 page, a repeated or oversized field a 400', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const token = csrfOf((await browser.get('/keys')).body)

  const badId = await browser.post('/keys/not-an-id/revoke', { csrf_token: token })
  t.equal(badId.statusCode, 404)
  t.equal(badId.headers['content-type'], 'text/html; charset=utf-8')
  t.match(badId.body, '<h1>Page not found</h1>')
  t.match(badId.body, 'There is no page at this address')
  t.match(badId.body, '<nav aria-label="Console">', 'inside the layout of the person signed in')

  const repeated = await ctx.app.inject({ method: 'GET', url: '/login?next=/calls&next=/agents' })
  t.equal(repeated.statusCode, 400)
  t.match(repeated.body, '<h1>That did not work</h1>')
  t.match(repeated.body, 'The page to open after signing in was given more than once. Check the address (the link may be mistyped or out of date).')
  t.notMatch(repeated.body, /querystring|must be string|pattern/, 'no validator jargon')

  const loginToken = csrfOf((await ctx.app.inject({ method: 'GET', url: '/login' })).body)
  const oversized = await new ConsoleClient(ctx.app).post('/login', { csrf_token: loginToken, email: user.email, password: PASSWORD, next: `/${'a'.repeat(2000)}` })
  t.equal(oversized.statusCode, 400)
  t.match(oversized.body, 'The page to open after signing in may be at most 2000 characters long. Go back to the form, correct it and send it again.')
  t.notOk(oversized.headers['set-cookie']?.toString().includes('switchboard_session='), 'and nobody is signed in')

  const contact = await browser.get('/contacts/65a0f00000000000000000zz')
  t.equal(contact.statusCode, 404, 'a GET with a bad id')
  t.match(contact.body, '<h1>Page not found</h1>')
  const saved = await browser.get('/contacts?search=a&search=b')
  t.equal(saved.statusCode, 400)
  t.match(saved.body, 'The search was given more than once.')
})
