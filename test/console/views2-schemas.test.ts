import t from 'tap'
import { setup } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { csrfOf, signedInWithKey } from '../helpers/console-client.ts'

// The schemas of the workspaces, phone numbers, campaigns, test phone call, versions, tests and workflow pages
// (reply.ts, page()): a bad id or step in the address is the 404 page before anything is looked up, a repeated query
// parameter a 400 page in words, and a form of rows keeps the fields it builds.

t.test('a bad id in the address is the 404 page; a repeated query parameter a 400 in words', async (t) => {
  const ctx = await setup(t)
  const { account, browser } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account, { agent_name: 'Desk' })
  const csrf = csrfOf((await browser.get('/workspaces')).body)

  for (const url of [
    '/workspaces/zzz', '/phone-numbers/not-an-id', '/campaigns/not-an-id', '/campaigns/not-an-id/results.csv',
    '/agents/nope/phone-call', `/agents/${agent}/versions/x`, `/agents/${agent}/versions/0`, `/agents/${agent}/tests/runs/nope`,
    `/agents/${agent}/tests/nope`, `/agents/${agent}/workflow/steps/Not-A-Step`
  ]) {
    const res = await browser.get(url)
    t.equal(res.statusCode, 404, url)
    t.match(res.body, '<h1>Page not found</h1>', url)
  }
  for (const url of ['/workspaces/zzz/members', '/phone-numbers/zzz/release', '/campaigns/zzz/pause', `/agents/${agent}/versions/x/restore`, `/agents/${agent}/workflow/steps/Bad/up`]) {
    t.equal((await browser.post(url, { csrf_token: csrf })).statusCode, 404, `POST ${url}`)
  }

  const repeated = await browser.get('/campaigns?skip=50&skip=100')
  t.equal(repeated.statusCode, 400)
  t.match(repeated.body, 'The page position was given more than once. Check the address')
  const words = await browser.get('/campaigns?skip=many')
  t.equal(words.statusCode, 400)
  t.match(words.body, 'The page position must be a number.')
  const twice = await browser.get('/phone-numbers?country=US&country=CA')
  t.equal(twice.statusCode, 400)
  t.match(twice.body, 'The country was given more than once.')
  t.notMatch(twice.body, /querystring|must be string|pattern/, 'no validator jargon')
})
