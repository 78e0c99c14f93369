import type { Test } from 'tap'
import { createAccount, setup, type Account, type SetupOptions, type TestContext } from '../../helpers/app.ts'
import { startTwilioStandIn, type TwilioStandIn } from '../../helpers/twilio-stand-in.ts'
import { ACCOUNT_SID, AUTH_TOKEN, PUBLIC, twilioSettings } from '../../helpers/twilio-phone.ts'
import { poll } from '../../helpers/poll.ts'
import { agentOf, ALWAYS, buyNumber } from './helpers.ts'

// The server with its workers against the Twilio stand-in (CALL_RUNTIME=voice, Twilio numbers), as
// test/telephony/twilio-calls.test.ts sets it up: the stand-in reaches the server through a route from PUBLIC.

export const FROM = '+14155550100'

export type Ctx = TestContext & { twilio: TwilioStandIn, account: Account, agentId: string }

export function twilioEnv (twilio: TwilioStandIn): Record<string, string> {
  return {
    ...twilioSettings(twilio.url),
    CALL_RUNTIME: 'voice',
    VOICE_ENGINE: 'simulator',
    CALL_TIME_SCALE: '0.01',
    CAMPAIGN_TICK_MS: '100',
    CAMPAIGN_ACCOUNT_CALLS_PER_MINUTE: '100000',
    DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true',
    DELIVERY_TIME_SCALE: '0.001',
    VOICE_STREAM_TIMEOUT_MS: '2000'
  }
}

export async function listen (t: Test, env: Record<string, string> = {}, options: SetupOptions = {}): Promise<Ctx> {
  const twilio = await startTwilioStandIn(t)
  twilio.addAccount(ACCOUNT_SID, AUTH_TOKEN)
  twilio.offer('US', [{ phone_number: FROM, area_code: '415', locality: 'San Francisco', region: 'CA' }])
  const ctx = await setup(t, { ...twilioEnv(twilio), ...env }, { workers: true, ...options })
  twilio.route(PUBLIC, await ctx.app.listen({ port: 0, host: '127.0.0.1' }))
  const account = await createAccount(ctx.db)
  // Hundreds of calls spend more than the welcome credits: without a top-up the dialler would pause (no_credits).
  await ctx.app.inject({ method: 'PATCH', url: '/v1/subscription/auto-top-up', headers: account.headers, payload: { enabled: true } })
  const agentId = await agentOf(ctx, account)
  await buyNumber(ctx, account, FROM, agentId)
  return { ...ctx, twilio, account, agentId }
}

/** The most calls the stand-in held at once (from each call's creation to its end), overall or to some numbers. */
export function maxOverlap (twilio: TwilioStandIn, to?: Set<string>): number {
  const events: Array<[number, number]> = []
  for (const call of twilio.calls) {
    if (call.direction !== 'outbound-api' || (to !== undefined && !to.has(call.to))) continue
    const created = (call as unknown as { created: Date }).created.getTime()
    const ended = call.endedAt === undefined ? Date.now() : performance.timeOrigin + call.endedAt
    events.push([created, 1], [ended, -1])
  }
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  let now = 0
  let max = 0
  for (const [, step] of events) max = Math.max(max, now += step)
  return max
}

/** How many times the stand-in was asked to call each number. */
export function callsPerNumber (twilio: TwilioStandIn): Map<string, number> {
  const counts = new Map<string, number>()
  for (const call of twilio.calls) if (call.direction === 'outbound-api') counts.set(call.to, (counts.get(call.to) ?? 0) + 1)
  return counts
}

export const number = (i: number, base = 14155560000) => `+${base + i}`

/** Creates a campaign of the account (calling hours always open and no per-minute cap unless `body` says). */
export async function create (ctx: Ctx, body: Record<string, unknown>) {
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/campaigns', headers: ctx.account.headers, payload: { name: 'Campaign', agent_id: ctx.agentId, from_number: FROM, calling_hours: ALWAYS, max_calls_per_minute: 100_000, ...body } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json().campaign as { _id: string }
}

export const view = async (ctx: Ctx, id: string) => (await ctx.app.inject({ method: 'GET', url: `/v1/campaigns/${id}`, headers: ctx.account.headers })).json()

export async function finished (ctx: Ctx, id: string, timeoutMs = 150_000) {
  return await poll(() => view(ctx, id), (c) => c.status === 'completed', { timeoutMs, intervalMs: 200, message: (c) => `campaign not completed: ${JSON.stringify(c.progress)}` })
}
