import type { TestContext } from '../../helpers/app.ts'
import type { Account } from '../../helpers/app.ts'

// Shared by the campaign tests: an agent, a number of the account and the campaign requests.

export async function agentOf (ctx: Pick<TestContext, 'app'>, account: Account, body: Record<string, unknown> = {}): Promise<string> {
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hi {{name}}.', general_prompt: 'You call about an appointment.' } })).json()
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Caller', llm_id: llm._id, ...body } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json()._id
}

/** Buys `number` (sandbox or Twilio, as the server is configured) for the account. */
export async function buyNumber (ctx: Pick<TestContext, 'app'>, account: Account, number: string, agentId?: string): Promise<void> {
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: number, ...(agentId !== undefined && { outbound_agent_id: agentId }) } })
  if (res.statusCode !== 201) throw new Error(res.body)
}

/** A multipart body with the settings and the CSV file. */
export function csvUpload (settings: unknown, csv: string | Buffer, boundary = 'campaign-boundary') {
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="settings"\r\n\r\n${JSON.stringify(settings)}\r\n` +
    `--${boundary}\r\nContent-Disposition: form-data; name="contacts"; filename="contacts.csv"\r\nContent-Type: text/csv\r\n\r\n`
  return {
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    payload: Buffer.concat([Buffer.from(head), Buffer.isBuffer(csv) ? csv : Buffer.from(csv), Buffer.from(`\r\n--${boundary}--\r\n`)])
  }
}

/** Every hour of every day: calling hours that never stop a test. */
export const ALWAYS = Object.fromEntries(['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((day) => [day, [{ start: '00:00', end: '24:00' }]]))
