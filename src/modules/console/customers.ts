import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import type { Selectable } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { CustomersTable } from '../../db/schema.ts'
import { HttpError } from '../../http/errors.ts'
import { E164, Email } from '../../http/schemas.ts'
import { MAX_JSON_DEPTH } from '../../http/validation.ts'
import { createCustomer, deleteCustomer, findCustomer, listCustomers, updateCustomer } from '../account/customer-queries.ts'
import { CustomerName, Metadata } from '../account/customers.ts'
import { fieldCheck, formFields, formOf, hasProblems, inputField, textareaField, type Problems } from './fields.ts'
import { dataTable, errorSummary, type Column } from './components.ts'
import { DRAFT_QUERY, FORM_PROBLEM, draftOf, formSaved, refuseForm } from './drafts.ts'
import { html } from './html.ts'
import { csrfField, layout, notice, when, type Viewer, viewerOf } from './pages.ts'
import { sessionOf } from './security.ts'
import { formBody, idParams, page, sendPage, text } from './reply.ts'

// The console's customers (docs/console.md): list and create on one page, edit and delete on the customer's
// own. The fields and their checks are the API's; deleting a customer that records still name is refused with
// the API's reason.
const LIST_LIMIT = 200
/** Metadata is free-form JSON; a form of the usual 16 KB holds less once URL-encoded, so these take more. */
const FORM_LIMIT = 128 * 1024

const FIELDS = ['customer_name', 'email', 'phone_number', 'metadata'] as const
// The fields' checks are the API's, with their problems shown at each field (check below).
const CUSTOMER_FORM = formBody({ customer_name: text('The name'), email: text('The e-mail address'), phone_number: text('The phone number'), metadata: text('The metadata') })
const CUSTOMER = idParams('id')
type CustomerForm = Record<typeof FIELDS[number], string>
type Customer = Selectable<CustomersTable>

const EMPTY: CustomerForm = { customer_name: '', email: '', phone_number: '', metadata: '' }

const noSuchCustomer = () => new HttpError(404, 'not_found', 'You have no customer with that id.')

const formFromRow = (customer: Customer): CustomerForm => ({
  customer_name: customer.name,
  email: customer.email ?? '',
  phone_number: customer.phone_number ?? '',
  metadata: Object.keys(customer.metadata).length === 0 ? '' : JSON.stringify(customer.metadata, null, 2)
})

/** Whether PostgreSQL can store the parsed JSON (no NUL, no half surrogate pair) at a depth the API allows too. */
function storable (value: unknown, depth = 0): boolean {
  if (depth > MAX_JSON_DEPTH) return false
  if (typeof value === 'string') return value.isWellFormed() && !value.includes('\0')
  if (typeof value !== 'object' || value === null) return true
  return Object.entries(value).every(([key, item]) => storable(key, depth) && storable(item, depth + 1))
}

interface Checked { name: string, email: string | null, phone_number: string | null, metadata: Record<string, unknown> }

export async function consoleCustomerRoutes (app: FastifyInstance, { db }: { db: DB }): Promise<void> {
  const checks = {
    customer_name: fieldCheck('The name', CustomerName),
    email: fieldCheck('The e-mail address', Email),
    phone_number: fieldCheck('The phone number', E164),
    metadata: fieldCheck('The metadata', Metadata, 'The metadata must be a JSON object, such as {"crm_id": "A-17"}.')
  }

  /** The form as the API would store it (empty e-mail, phone or metadata: none), or what is wrong with each field. */
  function check (form: CustomerForm): { values: Checked } | { problems: Problems } {
    let metadata: unknown
    try {
      metadata = form.metadata === '' ? {} : JSON.parse(form.metadata)
      if (!storable(metadata)) metadata = undefined
    } catch {
      metadata = undefined
    }
    const problems: Problems = {
      customer_name: checks.customer_name(form.customer_name),
      email: form.email === '' ? undefined : checks.email(form.email),
      phone_number: form.phone_number === '' ? undefined : checks.phone_number(form.phone_number),
      metadata: checks.metadata(metadata)
    }
    if (hasProblems(problems)) return { problems }
    return { values: { name: form.customer_name, email: form.email || null, phone_number: form.phone_number || null, metadata: metadata as Record<string, unknown> } }
  }

  async function ownCustomer (userId: string, id: string) {
    const customer = await findCustomer(db, userId, id)
    if (customer === undefined) throw noSuchCustomer()
    return customer
  }

  app.get<{ Querystring: { deleted?: string, draft?: string } }>('/customers', page({ querystring: Type.Object({ deleted: text('The deletion notice'), draft: DRAFT_QUERY }) }), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const [customers, draft] = await Promise.all([listCustomers(db, session.userId, { limit: LIST_LIMIT }), draftOf(db, session, '/customers', request.query.draft)])
    return sendPage(reply, 200, customersView({ viewer: viewerOf(session), customers, form: draft && formFields(draft.values, FIELDS), problems: draft?.problems, deleted: request.query.deleted !== undefined }))
  })

  app.post('/customers', page({ body: CUSTOMER_FORM }, { bodyLimit: FORM_LIMIT }), async (request, reply) => {
    const session = request.consoleSession!
    const form = formOf(request, FIELDS)
    const checked = check(form)
    if ('problems' in checked) return await refuseForm(db, reply, session, '/customers', form, checked.problems)
    const customer = await createCustomer(db, session.userId, checked.values)
    await formSaved(db, session, '/customers')
    return reply.redirect(`/customers/${customer.id}?saved=1`, 303)
  })

  app.get<{ Params: { id: string }, Querystring: { saved?: string, draft?: string } }>('/customers/:id', page({ params: CUSTOMER, querystring: Type.Object({ saved: text('The saved notice'), draft: DRAFT_QUERY }) }), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const customer = await ownCustomer(session.userId, request.params.id)
    const draft = await draftOf(db, session, `/customers/${customer.id}`, request.query.draft)
    // A refused delete's draft holds no values: the form shows the stored customer, the problem by the Delete button.
    const error = draft?.problems[FORM_PROBLEM]
    return sendPage(reply, 200, customerView({ viewer: viewerOf(session), customer, form: draft && error === undefined ? formFields(draft.values, FIELDS) : undefined, problems: error === undefined ? draft?.problems : undefined, error, saved: request.query.saved !== undefined }))
  })

  app.post<{ Params: { id: string } }>('/customers/:id', page({ params: CUSTOMER, body: CUSTOMER_FORM }, { bodyLimit: FORM_LIMIT }), async (request, reply) => {
    const session = request.consoleSession!
    const customer = await ownCustomer(session.userId, request.params.id)
    const form = formOf(request, FIELDS)
    const checked = check(form)
    if ('problems' in checked) return await refuseForm(db, reply, session, `/customers/${customer.id}`, form, checked.problems)
    await updateCustomer(db, session.userId, customer.id, checked.values)
    await formSaved(db, session, `/customers/${customer.id}`)
    return reply.redirect(`/customers/${customer.id}?saved=1`, 303)
  })

  app.post<{ Params: { id: string } }>('/customers/:id/delete', page({ params: CUSTOMER, body: formBody({}) }), async (request, reply) => {
    const session = request.consoleSession!
    const customer = await ownCustomer(session.userId, request.params.id)
    try {
      await deleteCustomer(db, session.userId, customer.id)
    } catch (err) {
      if (err instanceof HttpError && err.statusCode === 409) {
        return await refuseForm(db, reply, session, `/customers/${customer.id}`, {}, { [FORM_PROBLEM]: `Not deleted: ${err.message}.` }, 'delete')
      }
      throw err
    }
    return reply.redirect('/customers?deleted=1', 303)
  })
}

function customerForm (viewer: Viewer, action: string, submit: string, form: CustomerForm, problems: Problems) {
  return html`${errorSummary(problems)}
<form method="post" action="${action}" class="stack wide">
  ${csrfField(viewer.csrfToken)}
  ${inputField({ name: 'customer_name', label: 'Name', value: form.customer_name, problems, attrs: html` maxlength="200" required` })}
  ${inputField({ name: 'email', label: 'E-mail address', value: form.email, problems, hint: 'Optional.', attrs: html` type="email" maxlength="254" autocomplete="off"` })}
  ${inputField({ name: 'phone_number', label: 'Phone number', value: form.phone_number, problems, hint: 'Optional; E.164, such as +14155550123.', attrs: html` type="tel" maxlength="16" autocomplete="off"` })}
  ${textareaField({ name: 'metadata', label: 'Metadata', value: form.metadata, problems, hint: 'Optional: a JSON object of your own data, returned by the API as given.', attrs: html` rows="4"` })}
  <button type="submit">${submit}</button>
</form>`
}

const CUSTOMER_COLUMNS: Array<Column<Customer>> = [
  { header: 'Name', cell: (customer) => html`<a href="/customers/${customer.id}">${customer.name}</a>` },
  { header: 'E-mail address', cell: (customer) => customer.email ?? '' },
  { header: 'Phone number', cell: (customer) => customer.phone_number ?? '' },
  { header: 'Created', cell: (customer) => when(customer.created_at) }
]

/** The list of customers and the form of a new one. */
function customersView (options: { viewer: Viewer, customers: Customer[], form?: CustomerForm, problems?: Problems, deleted?: boolean }): string {
  const { viewer, customers } = options
  return layout({
    title: 'Customers',
    viewer,
    current: '/customers',
    body: html`
${options.deleted === true && notice('success', 'The customer is deleted.')}
<p>Customers are an agency's clients: agents, knowledge bases, calls and phone numbers can name one (through the API).</p>
${dataTable({ caption: `Your customers${customers.length === LIST_LIMIT ? ` (the first ${LIST_LIMIT})` : ''}`, columns: CUSTOMER_COLUMNS, rows: customers, empty: 'No customers yet.' })}
<h2>New customer</h2>
${customerForm(viewer, '/customers', 'Create customer', options.form ?? EMPTY, options.problems ?? {})}`
  })
}

/** A customer's page: its form, and its deletion (with the API's reason when refused). */
function customerView (options: { viewer: Viewer, customer: Customer, form?: CustomerForm, problems?: Problems, saved?: boolean, error?: string }): string {
  const { viewer, customer } = options
  return layout({
    title: customer.name,
    viewer,
    current: '/customers',
    body: html`
<p><a href="/customers">All customers</a></p>
${options.saved === true && notice('success', 'Saved.')}
${customerForm(viewer, `/customers/${customer.id}`, 'Save', options.form ?? formFromRow(customer), options.problems ?? {})}
<h2 id="delete">Delete</h2>
${options.error !== undefined && notice('error', options.error)}
<p>A customer can be deleted once no phone number, agent, call, contact or knowledge base names it.</p>
<form method="post" action="/customers/${customer.id}/delete">${csrfField(viewer.csrfToken)}<button type="submit" class="danger">Delete this customer</button></form>
<p class="hint">Customer id <code>${customer.id}</code>.</p>`
  })
}
