import type { FastifyInstance } from 'fastify'
import { Type, type Static } from 'typebox'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import { ContactName } from '../contacts/contacts.ts'
import { contactCalls, deleteContact, findContact, listContacts, renameContact, type ContactRow } from '../contacts/queries.ts'
import { listMessages, type MessageRow } from '../messaging/queries.ts'
import { messagesTable } from './messages.ts'
import { fieldCheck, formFields, formOf, inputField, type Problems } from './fields.ts'
import { dataTable, errorSummary, filterBar, filterField, pager, type Column } from './components.ts'
import { DRAFT_QUERY, draftOf, formSaved, refuseForm } from './drafts.ts'
import { html, type SafeHtml } from './html.ts'
import { csrfField, layout, notice, viewerOf, when, type Viewer } from './pages.ts'
import { changeScope, inScope, viewScope, type Scope } from './scope.ts'
import { formBody, idParams, listQuery, page, sendPage, text } from './reply.ts'

// The console's contacts (docs/contacts.md): the list with a search, and a contact's page with its calls, its
// name and its deletion (which erases its memory). The workspace rule is the calls' (scope.ts).

const PAGE_SIZE = 50
/** A contact's page lists this many of its newest messages (GET /v1/messages?contact_id pages through all). */
const MESSAGES_SHOWN = 50
/** A contact's page lists this many of its newest calls; the API pages through all of them. */
const CALLS_SHOWN = 100
const MAX_SEARCH_LENGTH = 200

// The list's search keeps its problems on the page (with the search form); the schemas name what each route reads.
const LIST_QUERY = Type.Object({ search: text('The search'), skip: text('The page position'), deleted: text('The deletion notice') })
const CONTACT = idParams('id')

const noSuchContact = () => new HttpError(404, 'not_found', 'You have no contact with that id.')

/** How the contact is known: its number or its address. */
export const contactLabel = (contact: Pick<ContactRow, 'phone_number' | 'email'>) => contact.phone_number ?? contact.email ?? ''

interface Search { search: string, skip: number }

/** The list's query, or what is wrong with it (shown on the page); NUL and half surrogates are refused before (validation.ts). */
function parseSearch (query: unknown): { filters: Search, problem?: string } {
  const { search, skip } = formFields(query, ['search', 'skip'])
  const filters = { search, skip: 0 }
  if (search.length > MAX_SEARCH_LENGTH) return { filters, problem: `The search must be at most ${MAX_SEARCH_LENGTH} characters.` }
  if (skip !== '' && !/^\d{1,9}$/.test(skip)) return { filters, problem: 'The page position must be a whole number.' }
  return { filters: { search, skip: Number(skip) } }
}

const CONTACT_COLUMNS: Array<Column<ContactRow & { call_count: number }>> = [
  { header: 'Contact', cell: (contact) => html`<a href="/contacts/${contact.id}">${contactLabel(contact)}</a>` },
  { header: 'Name', cell: (contact) => contact.name ?? '—' },
  { header: 'Calls', cell: (contact) => contact.call_count },
  { header: 'Last call', cell: (contact) => when(contact.last_call_at) }
]

function contactsPage (options: { viewer: Viewer, filters: Search, contacts?: Array<ContactRow & { call_count: number }>, total?: number, error?: string, deleted?: boolean }): string {
  const { viewer, filters, contacts, total = 0 } = options
  const query = (skip: number) => listQuery({ search: filters.search }, ['search'], skip)
  return layout({
    title: 'Contacts',
    viewer,
    current: '/contacts',
    body: html`
${options.deleted === true && notice('success', 'The contact is deleted: its calls stay, and no later call remembers them.')}
<p>The people your agents talk to, each known by a phone number or (web calls) an e-mail address. Agents with
“Remember earlier calls with the same customer” on are told of a contact's earlier calls.</p>
${filterBar({ action: '/contacts', label: 'Search contacts', fields: [filterField('search', 'Name, number or e-mail address', html`<input id="search" name="search" type="search" maxlength="${MAX_SEARCH_LENGTH}" value="${filters.search}">`)], submit: 'Search' })}
${options.error !== undefined && notice('error', options.error)}
${contacts !== undefined && dataTable({
  caption: `Contacts ${filters.skip + 1}–${filters.skip + contacts.length} of ${total}, the latest call first`,
  columns: CONTACT_COLUMNS,
  rows: contacts,
  empty: filters.skip > 0 ? 'No more contacts.' : filters.search === '' ? 'No contacts yet: each call with a known number or address makes one.' : 'No contacts match.'
})}
${contacts !== undefined && pager({
  label: 'Pages of contacts',
  previous: filters.skip > 0 ? { href: `/contacts${query(Math.max(0, filters.skip - PAGE_SIZE))}`, text: 'Previous contacts' } : undefined,
  next: filters.skip + PAGE_SIZE < total ? { href: `/contacts${query(filters.skip + PAGE_SIZE)}`, text: 'More contacts' } : undefined
})}`
  })
}

type ContactCalls = Awaited<ReturnType<typeof contactCalls>>

function contactPage (options: { viewer: Viewer, scope: Scope, contact: ContactRow, calls: ContactCalls, messages: MessageRow[], name?: string, problems?: Problems, saved?: boolean }): string {
  const { viewer, scope, contact, calls, messages } = options
  const problems = options.problems ?? {}
  const fact = (label: string, value: string | SafeHtml) => html`<dt>${label}</dt><dd>${value}</dd>`
  return layout({
    title: contact.name ?? contactLabel(contact),
    viewer,
    current: '/contacts',
    body: html`
<p><a href="/contacts">All contacts</a></p>
${options.saved === true && notice('success', 'Saved.')}
<dl class="facts">
  ${contact.phone_number !== null && fact('Phone number', contact.phone_number)}
  ${contact.email !== null && fact('E-mail address', contact.email)}
  ${fact('Name', contact.name ?? 'not known')}
  ${fact('First call', when(contact.created_at))}
  ${fact('Last call', when(contact.last_call_at))}
  ${fact('Contact id', html`<code>${contact.id}</code>`)}
</dl>
<h2>Calls</h2>
${calls.rows.length === 0
  ? html`<p>No calls.</p>`
  : html`<div class="table"><table>
  <caption>${calls.total > calls.rows.length ? `The ${calls.rows.length} newest of ${calls.total} calls` : `${calls.total} ${calls.total === 1 ? 'call' : 'calls'}`}, newest first</caption>
  <thead><tr><th scope="col">Started</th><th scope="col">Agent</th><th scope="col">Type</th><th scope="col">Status</th><th scope="col">Summary</th></tr></thead>
  <tbody>${calls.rows.map((call) => html`<tr>
    <td><a href="/calls/${call.id}">${when(call.start_timestamp)}</a></td>
    <td>${call.agent_name}</td>
    <td>${call.call_type}, ${call.direction}</td>
    <td>${call.call_status}</td>
    <td>${call.call_summary ?? '—'}</td>
  </tr>`)}</tbody>
</table></div>`}
<h2>Messages</h2>
${messages.length === 0 ? html`<p>No messages.</p>` : messagesTable(messages, `The e-mails, SMS and WhatsApp messages of its calls, newest first${messages.length === MESSAGES_SHOWN ? ` (the ${MESSAGES_SHOWN} newest)` : ''}`)}
${scope.canChange && html`<h2>Name</h2>
${errorSummary(problems)}
<form method="post" action="/contacts/${contact.id}" class="stack">
  ${csrfField(viewer.csrfToken)}
  ${inputField({ name: 'name', label: 'Name', value: options.name ?? contact.name ?? '', problems, hint: 'Empty: not known. A name set here is kept; otherwise a call whose analysis finds a name sets it.', attrs: html` maxlength="200" autocomplete="off"` })}
  <button type="submit">Save name</button>
</form>
<h2>Delete</h2>
<p>Deleting the contact erases its number or address, its name and its memory. Its calls stay, no longer linked to
anyone, so no later call remembers them; the next call from the same number makes a new contact.</p>
<form method="post" action="/contacts/${contact.id}/delete">${csrfField(viewer.csrfToken)}<button type="submit" class="danger">Delete this contact</button></form>`}`
  })
}

export async function consoleContactRoutes (app: FastifyInstance, { db }: { db: DB }): Promise<void> {
  const checkName = fieldCheck('The name', ContactName)

  async function contactInScope (scope: Scope, id: string): Promise<ContactRow> {
    const contact = await findContact(db, scope.ownerId, id)
    if (contact === undefined || !inScope(scope, contact)) throw noSuchContact()
    return contact
  }

  app.get<{ Querystring: Static<typeof LIST_QUERY> }>('/contacts', page({ querystring: LIST_QUERY }), async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const viewer = viewerOf(scoped.session)
    const { filters, problem } = parseSearch(request.query)
    if (problem !== undefined) return sendPage(reply, 400, contactsPage({ viewer, filters, error: problem }))
    const { rows, total } = await listContacts(db, scoped.scope.ownerId, { search: filters.search, workspaceId: scoped.scope.workspaceId }, { limit: PAGE_SIZE, offset: filters.skip })
    return sendPage(reply, 200, contactsPage({ viewer, filters, contacts: rows, total, deleted: request.query.deleted !== undefined }))
  })

  app.get<{ Params: { id: string }, Querystring: { saved?: string, draft?: string } }>('/contacts/:id', page({ params: CONTACT, querystring: Type.Object({ saved: text('The saved notice'), draft: DRAFT_QUERY }) }), async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const { scope, session } = scoped
    const contact = await contactInScope(scope, request.params.id)
    const [calls, messages, draft] = await Promise.all([
      contactCalls(db, scope.ownerId, contact.id, { limit: CALLS_SHOWN, offset: 0 }),
      listMessages(db, scope.ownerId, { contactId: contact.id, limit: MESSAGES_SHOWN }),
      scope.canChange ? draftOf(db, session, `/contacts/${contact.id}`, request.query.draft) : undefined
    ])
    return sendPage(reply, 200, contactPage({ viewer: viewerOf(session), scope, contact, calls, messages, name: draft?.values.name, problems: draft?.problems, saved: request.query.saved !== undefined }))
  })

  app.post<{ Params: { id: string } }>('/contacts/:id', page({ params: CONTACT, body: formBody({ name: text('The name') }) }), async (request, reply) => {
    const scope = changeScope(request)
    const contact = await contactInScope(scope, request.params.id)
    const { name } = formOf(request, ['name'])
    const problem = name === '' ? undefined : checkName(name)
    if (problem !== undefined) return await refuseForm(db, reply, request.consoleSession!, `/contacts/${contact.id}`, { name }, { name: problem })
    await renameContact(db, scope.ownerId, contact.id, name === '' ? null : name)
    await formSaved(db, request.consoleSession!, `/contacts/${contact.id}`)
    return reply.redirect(`/contacts/${contact.id}?saved=1`, 303)
  })

  app.post<{ Params: { id: string } }>('/contacts/:id/delete', page({ params: CONTACT, body: formBody({}) }), async (request, reply) => {
    const scope = changeScope(request)
    const contact = await contactInScope(scope, request.params.id)
    await deleteContact(db, scope.ownerId, contact.id)
    return reply.redirect('/contacts?deleted=1', 303)
  })
}
