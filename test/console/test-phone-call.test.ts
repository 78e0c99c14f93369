import t, { type Test } from 'tap'
import { createAccount, setup, type Account } from '../helpers/app.ts'
import { agentQuiet } from '../helpers/poll.ts'
import { csrfOf, signedInWithKey, unescapeHtml, type ConsoleClient } from '../helpers/console-client.ts'
import { listenWithTwilio, OUR_NUMBER, type PhoneContext } from '../helpers/twilio-phone.ts'
import { finishedCall } from '../helpers/voice-client.ts'

// "Place a test phone call" on the agent's page and "Simulate a call to this number" on a sandbox number's page
// (docs/console.md, "Test phone calls"): the console's forms call what POST /v1/call/make-phone-call calls, so the
// call reaches the carrier (the Twilio stand-in rings its callee) and every refusal is the API's, said in words.

type Ctx = { app: PhoneContext['app'], db: PhoneContext['db'] }

async function agentOf (ctx: Ctx, account: Account, body: Record<string, unknown> = {}) {
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello from the clinic.' } })).json()
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: llm._id, ...body } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json()._id as string
}

async function buy (ctx: Ctx, account: Account, payload: Record<string, unknown>) {
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json()._id as string
}

/** The page's text without tags, as a person reads it. */
const words = (body: string) => unescapeHtml(body.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' '))

/** A refused form answers 303 to the form's page, which says why (Post/Redirect/Get): that page. */
async function refusedPage (t: Test, browser: ConsoleClient, res: Awaited<ReturnType<ConsoleClient['post']>>, refusal: string) {
  t.equal(res.statusCode, 303, res.body)
  const location = res.headers.location as string
  t.match(location, new RegExp(`/phone-call\\?refused=${refusal}&to=[^&]*&from=[^&]*#phone-call$`))
  const page = await browser.get(location.replace(/#.*/, ''))
  t.equal(page.statusCode, 200)
  return page
}

const callCount = async (ctx: Ctx) => (await ctx.db.selectFrom('calls').select('id').execute()).length

t.test('the agent page\'s form rings the phone through Twilio: the call is placed at the carrier, answered, and linked', async (t) => {
  const ctx = await listenWithTwilio(t)
  const { account, browser } = await signedInWithKey(ctx)
  const agentId = await agentOf(ctx, account)
  await buy(ctx, account, { phone_number: OUR_NUMBER, outbound_agent_id: agentId })

  const page = await browser.get(`/agents/${agentId}`)
  t.equal(page.statusCode, 200)
  t.match(page.body, /<h2 id="phone-call-title">Place a test phone call<\/h2>/)
  t.match(page.body, new RegExp(`<option value="\\${OUR_NUMBER}" selected>\\${OUR_NUMBER} \\(Twilio, this agent&#39;s\\)</option>`), 'the agent\'s own number first, chosen')

  // As a person types it: spaces and brackets are taken out.
  const res = await browser.post(`/agents/${agentId}/phone-call`, { csrf_token: csrfOf(page.body), from_number: OUR_NUMBER, to_number: '+1 (415) 555-0123' })
  t.equal(res.statusCode, 303, res.body)
  const phone = await ctx.twilio.waitForCall('+14155550123')
  const placed = ctx.twilio.requests.find((r) => r.path === '/Calls.json')!
  t.equal(placed.form.get('From'), OUR_NUMBER, 'placed at Twilio from the chosen number')
  const [call] = await ctx.db.selectFrom('calls').selectAll().execute()
  t.match(call, { agent_id: agentId, direction: 'outbound', call_type: 'phone', call_from: OUR_NUMBER, call_to: '+14155550123', carrier: 'twilio' })
  t.equal(res.headers.location, `/agents/${agentId}/phone-call?placed=${call.id}&to=%2B14155550123&from=%2B14155550100#phone-call`)

  const after = await browser.get(res.headers.location!.replace(/#.*/, ''))
  t.equal(after.statusCode, 200)
  t.match(words(after.body), 'Calling +14155550123 now: the phone should ring in a moment.')
  t.match(after.body, `<a href="/calls/${call.id}">View this call</a>`)
  t.match(after.body, />Call again</, 'the form stays, to call again')
  t.match(after.body, /name="to_number" value="\+14155550123"/)

  const stream = await phone.waitForStream()
  await agentQuiet(stream)
  t.equal(ctx.openai.requests.speech[0].body.input, 'Hello from the clinic.', 'the person who answered hears the agent')
  await stream.hangup()
  const done = await finishedCall(ctx.app, account.headers, call.id)
  t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup', simulated: false })
  t.same(ctx.twilio.errors, [])
})

t.test('refusals are the API\'s, in words on the form, and no call is placed: do-not-call, inactive agent, a bad or foreign number, CSRF', async (t) => {
  const ctx = await listenWithTwilio(t)
  const { account, browser } = await signedInWithKey(ctx)
  const agentId = await agentOf(ctx, account)
  await buy(ctx, account, { phone_number: OUR_NUMBER })
  const csrf = csrfOf((await browser.get(`/agents/${agentId}`)).body)
  const place = async (form: Record<string, string>, id = agentId) => await browser.post(`/agents/${id}/phone-call`, { csrf_token: csrf, from_number: OUR_NUMBER, ...form })

  t.equal((await ctx.app.inject({ method: 'POST', url: '/v1/dnc', headers: account.headers, payload: { phone_number: '+14155550111' } })).statusCode, 201)
  const listed = await refusedPage(t, browser, await place({ to_number: '+14155550111' }), 'do_not_call')
  t.match(words(listed.body), 'No call: +14155550111 is on your do-not-call list. Take it off the list to call it.')
  t.match(listed.body, /name="to_number" value="\+14155550111"/, 'what was typed is kept')

  const bad = await refusedPage(t, browser, await place({ to_number: 'my phone' }), 'invalid')
  t.match(bad.body, /name="to_number" value="my phone"/, 'what was typed is kept')
  t.match(bad.body, /<p id="phone-call-to_number-error" class="field-error">Write the number with \+ and its country code, such as \+14155550123\.<\/p>/)
  t.match(bad.body, /aria-invalid="true"/)

  const other = await createAccount(ctx.db)
  const otherAgent = await agentOf(ctx, other)
  const foreignNumber = await refusedPage(t, browser, await place({ from_number: '+14155550999', to_number: '+14155550123' }), 'not_found')
  t.match(words(foreignNumber.body), 'No call: +14155550999 is not one of your numbers.')
  t.equal((await place({ to_number: '+14155550123' }, otherAgent)).statusCode, 404, 'another account\'s agent is not found')
  t.equal((await browser.get(`/agents/${otherAgent}/phone-call`)).statusCode, 404)

  t.equal((await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agentId}`, headers: account.headers, payload: { status: 'inactive' } })).statusCode, 200)
  const inactive = await refusedPage(t, browser, await place({ to_number: '+14155550123' }), 'agent_inactive')
  t.match(words(inactive.body), 'No call: this agent is inactive.')

  const forged = await browser.post(`/agents/${agentId}/phone-call`, { csrf_token: 'forged', from_number: OUR_NUMBER, to_number: '+14155550123' })
  t.equal(forged.statusCode, 403, 'a form without the page\'s CSRF token is refused')
  t.equal(await callCount(ctx), 0, 'no call was stored')
  t.equal(ctx.twilio.requests.filter((r) => r.path === '/Calls.json').length, 0, 'nothing reached Twilio')
})

t.test('the sandbox: no number yet, a simulated outbound call, a SIP number nobody carries, and a simulated inbound call', async (t) => {
  const ctx = await setup(t, { PHONE_CARRIER: 'sandbox', SIMULATOR_CALL_SECONDS: '0' }, { workers: true })
  const { account, browser } = await signedInWithKey(ctx)
  const agentId = await agentOf(ctx, account)

  const empty = await browser.get(`/agents/${agentId}`)
  t.match(words(empty.body), 'You have no phone number to call from yet: buy or import one on Phone numbers')
  t.notMatch(empty.body, /action="\/agents\/[0-9a-f]+\/phone-call"/, 'no form without a number')

  const numberId = await buy(ctx, account, { phone_number: '+12125550150' })
  const csrf = csrfOf((await browser.get(`/agents/${agentId}`)).body)
  const out = await browser.post(`/agents/${agentId}/phone-call`, { csrf_token: csrf, from_number: '+12125550150', to_number: '+12125550160' })
  t.equal(out.statusCode, 303, out.body)
  const shown = await browser.get(out.headers.location!.replace(/#.*/, ''))
  t.match(words(shown.body), 'A simulated call to +12125550160 started: no phone rings')
  const [outbound] = await ctx.db.selectFrom('calls').selectAll().execute()
  t.match(await finishedCall(ctx.app, account.headers, outbound.id), { direction: 'outbound', simulated: true, call_status: 'success' })

  t.equal((await ctx.app.inject({ method: 'PATCH', url: '/v1/phone-number/connect-to-sip', headers: account.headers, payload: { phone_number: '+4930555000', termination_uri: 'sip:pbx.example.test' } })).statusCode, 201)
  const sip = await refusedPage(t, browser, await browser.post(`/agents/${agentId}/phone-call`, { csrf_token: csrf, from_number: '+4930555000', to_number: '+12125550160' }), 'sip_not_connected')
  t.match(words(sip.body), 'No call: +4930555000 is connected to a SIP trunk whose calls this server does not carry')

  // The number's page: without an inbound agent there is nothing to answer; with one, the call is simulated.
  const before = await browser.get(`/phone-numbers/${numberId}`)
  t.match(words(before.body), 'Simulate a call to this number')
  t.match(words(before.body), 'Choose an inbound agent above and save first')
  const refusedPost = await browser.post(`/phone-numbers/${numberId}/simulate`, { csrf_token: csrf })
  t.equal(refusedPost.statusCode, 303, 'Post/Redirect/Get')
  t.equal(refusedPost.headers.location, `/phone-numbers/${numberId}?simulate_refused=no_inbound_agent#simulate`)
  const refused = await browser.get(`/phone-numbers/${numberId}?simulate_refused=no_inbound_agent`)
  t.notMatch((await browser.get(`/phone-numbers/${numberId}?simulate_refused=toString`)).body, 'No call:', 'a name that is no refusal says nothing')
  t.match(words(refused.body), 'No call: the number has no inbound agent.')

  t.equal((await ctx.app.inject({ method: 'PATCH', url: `/v1/phone-number/${numberId}`, headers: account.headers, payload: { inbound_agent_id: agentId } })).statusCode, 200)
  const simulated = await browser.post(`/phone-numbers/${numberId}/simulate`, { csrf_token: csrf })
  t.equal(simulated.statusCode, 303, simulated.body)
  const callId = /simulated=([0-9a-f]+)/.exec(simulated.headers.location!)![1]
  const page = await browser.get(`/phone-numbers/${numberId}?simulated=${callId}`)
  t.match(page.body, `<a href="/calls/${callId}">View this call</a>`)
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done, { agent_id: agentId, call_type: 'phone', direction: 'inbound', call_to: '+12125550150', call_from: '+12025550142', simulated: true, call_status: 'success' })
  t.ok(done.transcription.length >= 3, 'the scripted caller and the agent talked')

  // Another account's number is not found.
  const stranger = await signedInWithKey(ctx)
  t.equal((await stranger.browser.post(`/phone-numbers/${numberId}/simulate`, { csrf_token: csrfOf((await stranger.browser.get('/agents')).body) })).statusCode, 404)
  t.equal(await callCount(ctx), 2, 'no other call was made')
})
