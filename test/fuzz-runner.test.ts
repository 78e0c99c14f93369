import Fastify from 'fastify'
import t from 'tap'
import { crawl, fuzzRoutes, routeTable } from './helpers/fuzz.ts'

// The route fuzz itself (test/helpers/fuzz.ts) on a small app with planted faults, so that a fuzz file that passes
// means the faults it looks for are absent, not that the fuzz cannot see them.

const PAGE = `<!doctype html><form method="get" action="/report"><input type="date" name="day" value=""></form>
<form method="post" action="/items/0123456789abcdef01234567"><input type="hidden" name="csrf_token" value="t">
<input name="title" value="A"><select name="size"><option value="s">S</option><option value="l">L</option></select></form>
<a href="/items/0123456789abcdef01234567">item</a><a href="/busy">busy</a>`

async function plantedApp () {
  const app = Fastify()
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => done(null, Object.fromEntries(new URLSearchParams(body as string))))
  app.get('/', async (_request, reply) => reply.type('text/html').send(PAGE))
  // An impossible day is not refused: toISOString throws (a 500 in JSON, as a route without a page error handler answers).
  app.get<{ Querystring: { day?: string } }>('/report', async (request) => ({ day: request.query.day === undefined || request.query.day === '' ? null : new Date(`${request.query.day}T00:00:00Z`).toISOString() }))
  // Busy is allowed, as a page: this one is JSON.
  app.get('/busy', async (_request, reply) => await reply.code(503).send({ busy: true }))
  app.get('/items/:id', async (_request, reply) => reply.type('text/html').send('<p>item</p>'))
  // A NUL in a field reaches code that cannot store it.
  app.post<{ Body: Record<string, string> }>('/items/:id', async (request, reply) => {
    if (request.body?.csrf_token !== 'good') return await reply.code(403).type('text/html').send('refused')
    if (Object.values(request.body).some((value) => value.includes('\u0000'))) throw new Error('invalid byte sequence')
    return await reply.redirect('/', 303)
  })
  await app.ready()
  return app
}

t.test('the route fuzz finds an impossible day and a NUL that answer 500, and a 5xx that is not a page', async (t) => {
  const app = await plantedApp()
  t.teardown(() => app.close())
  const routes = routeTable(app)
  t.same(routes, [
    { method: 'GET', url: '/' }, { method: 'GET', url: '/report' }, { method: 'GET', url: '/busy' }, { method: 'GET', url: '/items/:id' }, { method: 'POST', url: '/items/:id' }
  ], 'the route table, HEAD left out')
  const samples = await crawl(app, routes, ['/'], { name: 'user', credentials: { headers: {} } })
  t.ok(samples.some((s) => s.method === 'POST' && s.url === '/items/0123456789abcdef01234567'), 'the POST form is a sample')
  t.ok(samples.some((s) => s.url === '/report?day='), 'the GET form is a sample')

  const callers = { user: () => ({ headers: {}, csrf: 'good' }) }
  const report = await fuzzRoutes(app, { routes, samples, values: ['0123456789abcdef01234567'], callers, runs: 10, seed: 1, html: true })
  const found = (route: string, reason: RegExp) => report.failures.some((f) => f.operation === route && reason.test(f.reason))
  t.ok(found('GET /report', /server error/), 'an impossible day in the query (the edge cases send every one)')
  t.ok(found('POST /items/:id', /server error/), 'a NUL in a form field')
  t.ok(found('GET /busy', /a 503 that is not a page/), 'a 503 that is not a page')
  t.notOk(found('GET /items/:id', /./), 'no failure where there is none')
  t.ok(report.statuses['POST /items/:id'][303] > 0, 'forms with the caller\'s CSRF token reach the handler')
  t.ok(report.statuses['POST /items/:id'][403] > 0, 'and some carry a wrong token or none')
})
