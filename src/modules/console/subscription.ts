import type { FastifyInstance, FastifyReply } from 'fastify'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import { getSubscription, listCreditEntries, updateSubscription } from '../account/credits.ts'
import { Credits, MAX_CREDITS, PositiveCredits } from '../account/subscription.ts'
import { fieldCheck, formOf, hasProblems, inputField, integerOf, problemsNotice, type Problems } from './fields.ts'
import { html } from './html.ts'
import { csrfField, layout, notice, when, viewerOf } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { sessionOf } from './security.ts'
import { HIDDEN, sendPage } from './reply.ts'

// The console's subscription (docs/console.md): plan, balance and period, the auto top-up settings (both of the
// API's PATCH routes in one form), and the credit ledger, newest first, a page at a time.
const PAGE_SIZE = 50

const FIELDS = ['auto_top_up_enabled', 'auto_top_up_threshold', 'top_up_amount'] as const
type TopUpForm = Record<typeof FIELDS[number], string>

const credits = (amount: number) => `${amount.toLocaleString('en-US')} credit${Math.abs(amount) === 1 ? '' : 's'}`
const dollars = (amount: number) => `${amount < 0 ? '−' : ''}$${(Math.abs(amount) / 100).toFixed(2)}`

export async function consoleSubscriptionRoutes (app: FastifyInstance, { db }: { db: DB }): Promise<void> {
  const range = (label: string, min: number) => `${label} is a whole number of credits from ${min.toLocaleString('en-US')} to ${MAX_CREDITS.toLocaleString('en-US')}.`
  const checks = {
    auto_top_up_threshold: fieldCheck('The threshold', Credits, range('The threshold', 0)),
    top_up_amount: fieldCheck('The top-up amount', PositiveCredits, range('The top-up amount', 1))
  }

  async function page (reply: FastifyReply, status: number, session: ConsoleSession, options: { skip?: number, form?: TopUpForm, problems?: Problems, saved?: boolean }) {
    const viewer = viewerOf(session)
    const skip = options.skip ?? 0
    const subscription = await getSubscription(db, session.userId)
    // One more than a page tells whether an older page exists.
    const listed = await listCreditEntries(db, session.userId, { limit: PAGE_SIZE + 1, skip })
    const entries = listed.slice(0, PAGE_SIZE)
    const form = options.form ?? {
      auto_top_up_enabled: subscription.autoTopUpEnabled ? 'on' : '',
      auto_top_up_threshold: String(subscription.autoTopUpThreshold),
      top_up_amount: String(subscription.topUpAmount)
    }
    const problems = options.problems ?? {}
    return sendPage(reply, status, layout({
      title: 'Subscription',
      viewer,
      current: '/subscription',
      body: html`
${options.saved === true && notice('success', 'Saved. The settings apply from the next charge.')}
<dl class="facts">
  <dt>Balance</dt><dd>${credits(subscription.creditBalance)} (${dollars(subscription.creditBalance)} of usage)</dd>
  <dt>Plan</dt><dd>${subscription.plan}</dd>
  <dt>Status</dt><dd>${subscription.status.replace('_', ' ')}</dd>
  <dt>Current period</dt><dd>${when(subscription.periodStart)} to ${when(subscription.periodEnd)}</dd>
</dl>
<p class="hint">One credit is one US cent of usage. Calls are charged when they end.</p>
<h2>Auto top-up</h2>
<p>When a charge leaves the balance below the threshold, the top-up amount is added once.</p>
${problemsNotice(problems)}
<form method="post" action="/subscription/auto-top-up" class="stack">
  ${csrfField(viewer.csrfToken)}
  <div class="check">
    <input id="auto_top_up_enabled" name="auto_top_up_enabled" type="checkbox" value="on"${form.auto_top_up_enabled !== '' && html` checked`}>
    <label for="auto_top_up_enabled">Top up automatically</label>
  </div>
  ${inputField({ name: 'auto_top_up_threshold', label: 'Threshold (credits)', value: form.auto_top_up_threshold, problems, hint: 'A balance below this after a charge adds one top-up.', attrs: html` type="number" min="0" max="${MAX_CREDITS}" step="1" required` })}
  ${inputField({ name: 'top_up_amount', label: 'Top-up amount (credits)', value: form.top_up_amount, problems, hint: 'Credits added by each top-up.', attrs: html` type="number" min="1" max="${MAX_CREDITS}" step="1" required` })}
  <button type="submit">Save auto top-up</button>
</form>
<h2>Credit ledger</h2>
${entries.length === 0
  ? html`<p>${skip > 0 ? 'No more entries.' : 'No entries yet.'}</p>`
  : html`<div class="table"><table>
  <caption>Entries ${skip + 1}–${skip + entries.length}, newest first</caption>
  <thead><tr><th scope="col">When</th><th scope="col">Kind</th><th scope="col">Credits</th><th scope="col">Description</th></tr></thead>
  <tbody>${entries.map((entry) => html`<tr>
    <td>${when(entry.created_at)}</td><td>${entry.kind.replace('_', ' ')}</td><td class="number">${entry.amount > 0 ? '+' : ''}${entry.amount.toLocaleString('en-US')}</td>
    <td>${entry.description}${entry.call_id !== null && html` <a href="/calls/${entry.call_id}">the call</a>`}</td>
  </tr>`)}</tbody>
</table></div>`}
${(skip > 0 || listed.length > PAGE_SIZE) && html`<nav aria-label="Pages of the ledger"><ul class="pager">
  ${skip > 0 && html`<li><a href="/subscription${skip > PAGE_SIZE ? `?skip=${skip - PAGE_SIZE}` : ''}" rel="prev">Newer entries</a></li>`}
  ${listed.length > PAGE_SIZE && html`<li><a href="/subscription?skip=${skip + PAGE_SIZE}" rel="next">Older entries</a></li>`}
</ul></nav>`}`
    }))
  }

  app.get<{ Querystring: { skip?: unknown, saved?: string } }>('/subscription', HIDDEN, async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const { skip = '0' } = request.query
    if (typeof skip !== 'string' || !/^\d{1,9}$/.test(skip)) throw new HttpError(400, 'bad_request', 'The page position (skip) must be a whole number.')
    return await page(reply, 200, session, { skip: Number(skip), saved: request.query.saved !== undefined })
  })

  app.post('/subscription/auto-top-up', HIDDEN, async (request, reply) => {
    const session = request.consoleSession!
    const form = formOf(request, FIELDS)
    const threshold = integerOf(form.auto_top_up_threshold)
    const amount = integerOf(form.top_up_amount)
    const problems: Problems = { auto_top_up_threshold: checks.auto_top_up_threshold(threshold), top_up_amount: checks.top_up_amount(amount) }
    if (hasProblems(problems)) return await page(reply, 400, session, { form, problems })
    await updateSubscription(db, session.userId, { autoTopUpEnabled: form.auto_top_up_enabled !== '', autoTopUpThreshold: threshold as number, topUpAmount: amount as number })
    return reply.redirect('/subscription?saved=1', 303)
  })
}
