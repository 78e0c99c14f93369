import type { FastifyInstance, FastifyReply } from 'fastify'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { getSubscription, listCreditEntries, updateSubscription } from '../account/credits.ts'
import { Credits, MAX_CREDITS, PositiveCredits } from '../account/subscription.ts'
import { fieldCheck, formFields, formOf, hasProblems, inputField, integerOf, type Problems } from './fields.ts'
import { dataTable, errorSummary, pager, type Column } from './components.ts'
import { DRAFT_QUERY, draftOf, formSaved, refuseForm } from './drafts.ts'
import { html } from './html.ts'
import { csrfField, layout, notice, when, viewerOf, type Viewer } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { sessionOf } from './security.ts'
import { count, formBody, page, sendPage, text } from './reply.ts'

// The console's subscription (docs/console.md): plan, balance and period, the auto top-up settings (both of the
// API's PATCH routes in one form), and the credit ledger, newest first, a page at a time.
const PAGE_SIZE = 50

const FIELDS = ['auto_top_up_enabled', 'auto_top_up_threshold', 'top_up_amount'] as const
type TopUpForm = Record<typeof FIELDS[number], string>
// The amounts' problems are shown at their fields (checks below); the ledger's position is the schema's to check.
const TOP_UP_FORM = formBody({ auto_top_up_enabled: text('Top up automatically'), auto_top_up_threshold: text('The threshold'), top_up_amount: text('The top-up amount') })
const LEDGER_QUERY = Type.Object({ skip: count('The page position', 999_999_999), saved: text('The saved notice'), draft: DRAFT_QUERY })

const credits = (amount: number) => `${amount.toLocaleString('en-US')} credit${Math.abs(amount) === 1 ? '' : 's'}`
const dollars = (amount: number) => `${amount < 0 ? '−' : ''}$${(Math.abs(amount) / 100).toFixed(2)}`

type Subscription = Awaited<ReturnType<typeof getSubscription>>
type Entry = Awaited<ReturnType<typeof listCreditEntries>>[number]

const LEDGER_COLUMNS: Array<Column<Entry>> = [
  { header: 'When', cell: (entry) => when(entry.created_at) },
  { header: 'Kind', cell: (entry) => entry.kind.replace('_', ' ') },
  { header: 'Credits', cell: (entry) => `${entry.amount > 0 ? '+' : ''}${entry.amount.toLocaleString('en-US')}`, numeric: true },
  { header: 'Description', cell: (entry) => html`${entry.description}${entry.call_id !== null && html` <a href="/calls/${entry.call_id}">the call</a>`}` }
]

/** Plan, balance and period; the auto top-up form; a page of the ledger (`older`: an older page exists). */
function subscriptionView (options: { viewer: Viewer, subscription: Subscription, entries: Entry[], skip: number, older: boolean, form: TopUpForm, problems: Problems, saved?: boolean }): string {
  const { viewer, subscription, entries, skip, older, form, problems } = options
  return layout({
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
${errorSummary(problems)}
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
${dataTable({ caption: `Entries ${skip + 1}–${skip + entries.length}, newest first`, columns: LEDGER_COLUMNS, rows: entries, empty: skip > 0 ? 'No more entries.' : 'No entries yet.' })}
${pager({
  label: 'Pages of the ledger',
  previous: skip > 0 ? { href: `/subscription${skip > PAGE_SIZE ? `?skip=${skip - PAGE_SIZE}` : ''}`, text: 'Newer entries' } : undefined,
  next: older ? { href: `/subscription?skip=${skip + PAGE_SIZE}`, text: 'Older entries' } : undefined
})}`
  })
}

export async function consoleSubscriptionRoutes (app: FastifyInstance, { db }: { db: DB }): Promise<void> {
  const range = (label: string, min: number) => `${label} is a whole number of credits from ${min.toLocaleString('en-US')} to ${MAX_CREDITS.toLocaleString('en-US')}.`
  const checks = {
    auto_top_up_threshold: fieldCheck('The threshold', Credits, range('The threshold', 0)),
    top_up_amount: fieldCheck('The top-up amount', PositiveCredits, range('The top-up amount', 1))
  }

  async function showSubscription (reply: FastifyReply, session: ConsoleSession, options: { skip?: number, form?: TopUpForm, problems?: Problems, saved?: boolean }) {
    const skip = options.skip ?? 0
    const subscription = await getSubscription(db, session.userId)
    // One more than a page tells whether an older page exists.
    const listed = await listCreditEntries(db, session.userId, { limit: PAGE_SIZE + 1, skip })
    const form = options.form ?? {
      auto_top_up_enabled: subscription.autoTopUpEnabled ? 'on' : '',
      auto_top_up_threshold: String(subscription.autoTopUpThreshold),
      top_up_amount: String(subscription.topUpAmount)
    }
    return sendPage(reply, 200, subscriptionView({
      viewer: viewerOf(session), subscription, entries: listed.slice(0, PAGE_SIZE), skip, older: listed.length > PAGE_SIZE, form, problems: options.problems ?? {}, saved: options.saved
    }))
  }

  app.get<{ Querystring: { skip?: number, saved?: string, draft?: string } }>('/subscription', page({ querystring: LEDGER_QUERY }), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const draft = await draftOf(db, session, '/subscription', request.query.draft)
    return await showSubscription(reply, session, { skip: request.query.skip, saved: request.query.saved !== undefined, form: draft && formFields(draft.values, FIELDS), problems: draft?.problems })
  })

  app.post('/subscription/auto-top-up', page({ body: TOP_UP_FORM }), async (request, reply) => {
    const session = request.consoleSession!
    const form = formOf(request, FIELDS)
    const threshold = integerOf(form.auto_top_up_threshold)
    const amount = integerOf(form.top_up_amount)
    const problems: Problems = { auto_top_up_threshold: checks.auto_top_up_threshold(threshold), top_up_amount: checks.top_up_amount(amount) }
    if (hasProblems(problems)) return await refuseForm(db, reply, session, '/subscription', form, problems)
    await updateSubscription(db, session.userId, { autoTopUpEnabled: form.auto_top_up_enabled !== '', autoTopUpThreshold: threshold as number, topUpAmount: amount as number })
    await formSaved(db, session, '/subscription')
    return reply.redirect('/subscription?saved=1', 303)
  })
}
