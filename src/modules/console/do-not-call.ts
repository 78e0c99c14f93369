import type { FastifyInstance } from 'fastify'
import { Type, type Static } from 'typebox'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import { E164 } from '../../http/schemas.ts'
import { addDoNotCallNumbers, DNC_MAX_NUMBERS, DNC_NOTE_MAX_LENGTH } from '../contacts/dnc.ts'
import { deleteDoNotCall, listDoNotCall, type DoNotCallRow } from '../contacts/dnc-queries.ts'
import { fieldCheck, formFields, formOf, hasProblems, inputField, type Problems } from './fields.ts'
import { dataTable, errorSummary, filterBar, filterField, pager, type Column } from './components.ts'
import { DRAFT_QUERY, FORM_PROBLEM, draftOf, formSaved, refuseForm } from './drafts.ts'
import { html } from './html.ts'
import { csrfField, layout, notice, viewerOf, when, type Viewer } from './pages.ts'
import { sessionOf } from './security.ts'
import { formBody, listQuery, page, sendPage, text } from './reply.ts'

// The console's do-not-call list (docs/contacts.md, "Do not call"): the account's list with a search by digits, a
// form that adds a number, and a button per number that takes it off. One list per account: a page of the account,
// not of a workspace (pages.ts NAV).

const PAGE_SIZE = 50
const SOURCES: Record<string, string> = { api: 'API', console: 'Console', call: 'The caller asked', campaign: 'Campaign' }

// The search keeps its problems on the page, with its form.
const LIST_QUERY = Type.Object({ search: text('The search'), skip: text('The page position'), done: text('The notice'), draft: DRAFT_QUERY })

interface Search { search: string, skip: number }
interface AddForm { phone_number: string, note: string }

const EMPTY: AddForm = { phone_number: '', note: '' }

/** The list's query, or what is wrong with it: the search is the digits of a number, written any way. */
function parseSearch (query: unknown): { filters: Search, problem?: string } {
  const { search, skip } = formFields(query, ['search', 'skip'])
  const filters = { search, skip: 0 }
  if (!/^\+?[\d\s().-]{0,40}$/.test(search)) return { filters, problem: 'Search by the digits of a number, such as 415 555.' }
  if (skip !== '' && !/^\d{1,9}$/.test(skip)) return { filters, problem: 'The page position must be a whole number.' }
  return { filters: { search, skip: Number(skip) } }
}

const NOTICES: Record<string, string> = {
  added: 'The number is on the list: no call reaches it any more.',
  listed: 'The number was on the list already.',
  removed: 'The number is off the list: it may be called again.'
}

const source = (row: DoNotCallRow) => SOURCES[row.source] ?? row.source

const numberColumns = (csrfToken: string): Array<Column<DoNotCallRow>> => [
  { header: 'Number', cell: (row) => row.phone_number },
  { header: 'Added by', cell: (row) => row.call_id === null ? source(row) : html`<a href="/calls/${row.call_id}">${source(row)}</a>` },
  { header: 'Note', cell: (row) => row.note ?? '—' },
  { header: 'Added', cell: (row) => when(row.created_at) },
  {
    header: 'Remove',
    cell: (row) => html`<form method="post" action="/do-not-call/remove">${csrfField(csrfToken)}<input type="hidden" name="phone_number" value="${row.phone_number}"><button type="submit" class="danger" aria-label="Remove ${row.phone_number}">Remove</button></form>`
  }
]

function doNotCallPage (options: { viewer: Viewer, filters: Search, rows?: DoNotCallRow[], total?: number, error?: string, done?: string, form?: AddForm, problems?: Problems }): string {
  const { viewer, filters, rows, total = 0 } = options
  const form = options.form ?? EMPTY
  const problems = options.problems ?? {}
  const query = (skip: number) => listQuery({ search: filters.search }, ['search'], skip)
  return layout({
    title: 'Do not call',
    viewer,
    current: '/do-not-call',
    body: html`
${options.done !== undefined && NOTICES[options.done] !== undefined && notice('success', NOTICES[options.done])}
<p>Numbers your agents never call: a call to one is refused, a callback to one is cancelled, a campaign skips it.
An agent with the “Do not call” tool adds a caller who asks not to be called again. At most ${DNC_MAX_NUMBERS.toLocaleString('en')} numbers.</p>
<h2 id="add-number">Add a number</h2>
${errorSummary(problems)}
<form method="post" action="/do-not-call" class="stack">
  ${csrfField(viewer.csrfToken)}
  ${inputField({ name: 'phone_number', label: 'Phone number', value: form.phone_number, problems, hint: 'E.164: +, the country code and the number, such as +14155550123.', attrs: html` type="tel" maxlength="16" required autocomplete="off"` })}
  ${inputField({ name: 'note', label: 'Note (optional)', value: form.note, problems, hint: 'Why it is listed.', attrs: html` maxlength="${DNC_NOTE_MAX_LENGTH}" autocomplete="off"` })}
  <button type="submit">Add to the list</button>
</form>
<h2>The list</h2>
${filterBar({ action: '/do-not-call', label: 'Search the do-not-call list', fields: [filterField('search', 'Digits of the number', html`<input id="search" name="search" type="search" maxlength="40" value="${filters.search}">`)], submit: 'Search' })}
${options.error !== undefined && notice('error', options.error)}
${rows !== undefined && dataTable({
  caption: `Numbers ${filters.skip + 1}–${filters.skip + rows.length} of ${total}, the newest first`,
  columns: numberColumns(viewer.csrfToken),
  rows,
  empty: filters.skip > 0 ? 'No more numbers.' : filters.search === '' ? 'No numbers yet.' : 'No numbers match.'
})}
${rows !== undefined && pager({
  label: 'Pages of the list',
  previous: filters.skip > 0 ? { href: `/do-not-call${query(Math.max(0, filters.skip - PAGE_SIZE))}`, text: 'Previous numbers' } : undefined,
  next: filters.skip + PAGE_SIZE < total ? { href: `/do-not-call${query(filters.skip + PAGE_SIZE)}`, text: 'More numbers' } : undefined
})}`
  })
}

export async function consoleDoNotCallRoutes (app: FastifyInstance, { db }: { db: DB }): Promise<void> {
  const checkNumber = fieldCheck('The phone number', E164, 'Write the number in E.164: +, the country code and the number, such as +14155550123.')
  const checkNote = fieldCheck('The note', { type: 'string', maxLength: DNC_NOTE_MAX_LENGTH })

  app.get<{ Querystring: Static<typeof LIST_QUERY> }>('/do-not-call', page({ querystring: LIST_QUERY }), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const { filters, problem } = parseSearch(request.query)
    if (problem !== undefined) return sendPage(reply, 400, doNotCallPage({ viewer: viewerOf(session), filters, error: problem }))
    const [{ rows, total }, draft] = await Promise.all([
      listDoNotCall(db, session.userId, { digits: filters.search.replace(/\D/g, '') }, { limit: PAGE_SIZE, offset: filters.skip }),
      draftOf(db, session, '/do-not-call', request.query.draft)
    ])
    return sendPage(reply, 200, doNotCallPage({ viewer: viewerOf(session), filters, rows, total, done: request.query.done, form: draft && formFields(draft.values, ['phone_number', 'note']), problems: draft?.problems }))
  })

  app.post('/do-not-call', page({ body: formBody({ phone_number: text('The phone number'), note: text('The note') }) }), async (request, reply) => {
    const session = request.consoleSession!
    const form = formOf(request, ['phone_number', 'note'])
    const problems = { phone_number: checkNumber(form.phone_number), note: checkNote(form.note) }
    if (hasProblems(problems)) return await refuseForm(db, reply, session, '/do-not-call', form, problems)
    try {
      const added = await addDoNotCallNumbers(db, session.userId, [{ phone_number: form.phone_number, source: 'console', note: form.note === '' ? undefined : form.note }])
      await formSaved(db, session, '/do-not-call')
      return reply.redirect(`/do-not-call?done=${added.length > 0 ? 'added' : 'listed'}`, 303)
    } catch (err) {
      if (err instanceof HttpError && err.code === 'dnc_limit_reached') return await refuseForm(db, reply, session, '/do-not-call', form, { [FORM_PROBLEM]: `Not added: ${err.message}.` }, 'add-number')
      throw err
    }
  })

  app.post('/do-not-call/remove', page({ body: formBody({ phone_number: text('The phone number') }) }), async (request, reply) => {
    const session = request.consoleSession!
    const { phone_number: number } = formOf(request, ['phone_number'])
    if (checkNumber(number) !== undefined || !await deleteDoNotCall(db, session.userId, number)) {
      throw new HttpError(404, 'not_found', 'That number is not on your do-not-call list.')
    }
    return reply.redirect('/do-not-call?done=removed', 303)
  })
}
