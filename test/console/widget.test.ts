import t from 'tap'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup } from '../helpers/app.ts'
import { ConsoleClient, createConsoleUser, PASSWORD } from '../helpers/console-client.ts'
import { createAgent } from '../helpers/calls.ts'

// The agent page's website widget section: off or on, the tag to paste (with the key once there is one), the key
// created, rotated and deleted with its buttons, and what keeps the key from working said in words.

t.test('the widget section: off, then the tag with the key, rotate and delete', async (t) => {
  const ctx = await setup(t, { PUBLIC_BASE_URL: 'https://switchboard.example.com' })
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id, { name: 'test' })
  const account = { user, key, headers: { 'x-api-key': key } }
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const agent = await createAgent(ctx.app, account)
  const page = `/agents/${agent._id}`

  const off = await browser.get(page)
  t.match(off.body, 'The widget is off: no site shows it.')
  t.match(off.body, `&lt;script src=&quot;https://switchboard.example.com/widget.js&quot; data-agent-id=&quot;${agent._id}&quot; data-token-url=`)
  t.notMatch(off.body, 'src="/widget.js"', 'no preview while it is off')

  const created = await browser.submit(page, `${page}/widget-key`, {})
  t.equal(created.statusCode, 303)
  const stored = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/widget-key`, headers: account.headers })).json()
  t.match(stored.widget_key, /^wk_/)
  const withKey = await browser.get(page)
  t.match(withKey.body, `data-widget-key=&quot;${stored.widget_key}&quot;`)
  t.match(withKey.body, 'The widget is off: turn on')
  t.match(withKey.body, 'Rotate the widget key')

  await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { widget_settings: { enabled: true } } })
  const on = await browser.get(page)
  t.match(on.body, 'The widget is on.')
  t.match(on.body, 'No site may use the key', 'an empty list of sites is named')
  t.match(on.body, `<script src="/widget.js" data-agent-id="${agent._id}" data-preview=`, 'a preview')

  await browser.submit(page, `${page}/widget-key`, {})
  const rotated = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/widget-key`, headers: account.headers })).json()
  t.not(rotated.widget_key, stored.widget_key)
  await browser.submit(page, `${page}/widget-key/delete`, {})
  t.match((await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/widget-key`, headers: account.headers })).json(), { widget_key: null })
  t.equal((await browser.post(`${page}/widget-key`, {})).statusCode, 403, 'no CSRF token, no key')
})
