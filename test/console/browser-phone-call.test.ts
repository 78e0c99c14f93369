import t from 'tap'
import { agentQuiet } from '../helpers/poll.ts'
import { launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { PASSWORD, signedInWithKey } from '../helpers/console-client.ts'
import { listenWithTwilio, OUR_NUMBER } from '../helpers/twilio-phone.ts'
import { finishedCall } from '../helpers/voice-client.ts'

// "Place a test phone call" and "Simulate a call to this number" in real Chromium, with axe-core on every state:
// the agent's form rings the Twilio stand-in's callee, a do-not-call number and a bad number are said in words, and
// a sandbox number's simulated call is answered by its inbound agent.

const SANDBOX_NUMBER = '+12125550150'
/** Where a test run may leave screenshots to look at (unset: none are taken). */
const SHOTS = process.env.SCREENSHOT_DIR

t.test('ring my phone with this agent, refusals in words, and a simulated call to a sandbox number: in Chromium', async (t) => {
  const ctx = await listenWithTwilio(t, { SIMULATOR_CALL_SECONDS: '0' })
  const { user, account } = await signedInWithKey(ctx)
  const api = async (method: 'POST' | 'PATCH', url: string, payload: Record<string, unknown>) => {
    const res = await ctx.app.inject({ method, url, headers: account.headers, payload })
    if (res.statusCode >= 300) throw new Error(`${url}: ${res.body}`)
    return res.json()
  }
  const llm = await api('POST', '/v1/llm', { begin_message: 'Hello from the clinic.' })
  const agent = await api('POST', '/v1/agent', { agent_name: 'Front desk', llm_id: llm._id })
  await api('POST', '/v1/phone-number/buy', { phone_number: OUR_NUMBER, outbound_agent_id: agent._id })
  const sandbox = await api('POST', '/v1/phone-number/import-carrier', { phone_number: SANDBOX_NUMBER, carrier: 'sandbox', inbound_agent_id: agent._id })
  await api('POST', '/v1/dnc', { phone_number: '+14155550111' })

  const browser = await launchChromium(t)
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
  const { problems, axe, check } = watchPage(page, { failedLoads: 'ignored' })
  const shot = async (name: string) => { if (SHOTS !== undefined) await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true }) }
  await signInAt(page, ctx.url, user.email, PASSWORD)

  await page.goto(`${ctx.url}/agents/${agent._id as string}`)
  const section = page.locator('#phone-call')
  t.equal(await section.getByLabel('Call from').inputValue(), OUR_NUMBER, 'the agent\'s outbound number is chosen')
  await check('agent page')
  await section.screenshot(SHOTS === undefined ? {} : { path: `${SHOTS}/agent-section.png` })

  // A do-not-call number: the API's 409, in words, with what was typed kept.
  await section.getByLabel('Number to call').fill('+1 415 555 0111')
  await section.getByRole('button', { name: 'Call this number' }).click()
  await page.waitForURL(/\/phone-call\?refused=do_not_call&/)
  t.match(await page.getByRole('alert').textContent(), /^No call: \+14155550111 is on your do-not-call list\. Take it off the list to call it\.$/)
  // Post/Redirect/Get: a reload shows the refusal again and sends nothing.
  await page.reload()
  t.match(await page.getByRole('alert').textContent(), /^No call: \+14155550111 is on your do-not-call list/)
  t.equal(await page.getByLabel('Number to call').inputValue(), '+14155550111', 'the number is kept')
  await check('do-not-call refusal')
  await shot('refused')

  await page.getByLabel('Number to call').fill('my phone')
  await page.getByRole('button', { name: 'Call this number' }).click()
  await page.getByText('Write the number with + and its country code').waitFor()
  t.equal(await page.getByLabel('Number to call').getAttribute('aria-invalid'), 'true')
  await check('bad number')
  await shot('bad-number')

  // The call: Twilio is asked to place it and the stand-in's callee answers.
  await page.getByLabel('Number to call').fill('+14155550123')
  await page.getByRole('button', { name: 'Call this number' }).click()
  await page.waitForURL(/\/phone-call\?placed=/)
  t.match(await page.getByRole('status').textContent(), /^Calling \+14155550123 now: the phone should ring in a moment\. Answer it to talk to Front desk\. View this call$/)
  const phone = await ctx.twilio.waitForCall('+14155550123')
  t.ok(await page.getByRole('button', { name: 'Call again' }).isVisible(), 'Call again')
  await check('placed')
  await shot('placed')
  const stream = await phone.waitForStream()
  await agentQuiet(stream)
  await stream.hangup()
  await page.getByRole('link', { name: 'View this call' }).click()
  await page.waitForURL(/\/calls\/[0-9a-f]+$/)
  const callId = page.url().split('/').at(-1)!
  t.match(await finishedCall(ctx.app, account.headers, callId), { direction: 'outbound', call_to: '+14155550123', simulated: false })

  // The sandbox number's page: a simulated inbound call, answered by its inbound agent.
  await page.goto(`${ctx.url}/phone-numbers/${sandbox._id as string}`)
  await check('sandbox number page')
  await page.getByRole('button', { name: 'Simulate a call' }).click()
  await page.waitForURL(/\?simulated=[0-9a-f]+#simulate$/)
  t.match(await page.getByRole('status').textContent(), /^A simulated call to \+12125550150 started: its inbound agent answers in a few seconds\. View this call$/)
  await check('simulated')
  await shot('simulated')
  const simulatedId = /simulated=([0-9a-f]+)/.exec(page.url())![1]
  t.match(await finishedCall(ctx.app, account.headers, simulatedId), { direction: 'inbound', call_to: SANDBOX_NUMBER, simulated: true, call_status: 'success' })
  await page.getByRole('link', { name: 'View this call' }).click()
  await page.waitForURL(`${ctx.url}/calls/${simulatedId}`)
  await shot('simulated-call')

  t.same(Object.entries(axe).filter(([, found]) => found.length > 0), [], 'no axe-core violations in any state')
  t.same(problems, [], 'no script errors and no CSP violations')
})
