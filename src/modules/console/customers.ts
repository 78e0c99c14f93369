import type { FastifyInstance, FastifyReply } from 'fastify'
import type { Selectable } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { CustomersTable } from '../../db/schema.ts'
import { HttpError } from '../../http/errors.ts'
import { E164, Email } from '../../http/schemas.ts'
import { MAX_JSON_DEPTH } from '../../http/validation.ts'
import { createCustomer, deleteCustomer, findCustomer, listCustomers, updateCustomer } from '../account/customer-queries.ts'
import { CustomerName, Metadata } from '../account/customers.ts'
import { fieldCheck, formOf, hasProblems, inputField, problemsNotice, textareaField, type Problems } from './fields.ts'
import { html } from './html.ts'
import { csrfField, layout, notice, when, type Viewer, viewerOf } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { sessionOf } from './security.ts'
import { HIDDEN, ID, sendPage } from './reply.ts'

// The console's customers (docs/console.md): list and create on one page, edit and delete on the customer's
// own. The fields and their checks are the API's; deleting a customer that records still name is refused with
// the API's reason.
const LIST_LIMIT = 200
/** Metadata is free-form JSON; a form of the usual 16 KB holds less once URL-encoded, so these take more. */
const FORM_ROUTE = { ...HIDDEN, bodyLimit: 128 * 1024 }

const FIELDS = ['customer_name', 'email', 'phone_number', 'metadata'] as const
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
    const customer = ID.test(id) ? await findCustomer(db, userId, id.toLowerCase()) : undefined
    if (customer === undefined) throw noSuchCustomer()
    return customer
  }

  async function listPage (reply: FastifyReply, status: number, session: ConsoleSession, options: { form?: CustomerForm, problems?: Problems, deleted?: boolean }) {
    const viewer = viewerOf(session)
    const customers = await listCustomers(db, session.userId, { limit: LIST_LIMIT })
    return sendPage(reply, status, layout({
      title: 'Customers',
      viewer,
      current: '/customers',
      body: html`
${options.deleted === true && notice('success', 'The customer is deleted.')}
<p>Customers are an agency's clients: agents, knowledge bases, calls and phone numbers can name one (through the API).</p>
${customers.length === 0
  ? html`<p>No customers yet.</p>`
  : html`<div class="table"><table>
  <caption>Your customers${customers.length === LIST_LIMIT && html` (the first ${LIST_LIMIT})`}</caption>
  <thead><tr><th scope="col">Name</th><th scope="col">E-mail address</th><th scope="col">Phone number</th><th scope="col">Created</th></tr></thead>
  <tbody>${customers.map((customer) => html`<tr>
    <td><a href="/customers/${customer.id}">${customer.name}</a></td><td>${customer.email ?? ''}</td><td>${customer.phone_number ?? ''}</td><td>${when(customer.created_at)}</td>
  </tr>`)}</tbody>
</table></div>`}
<h2>New customer</h2>
${customerForm(viewer, '/customers', 'Create customer', options.form ?? EMPTY, options.problems ?? {})}`
    }))
  }

  async function customerPage (reply: FastifyReply, status: number, session: ConsoleSession, customer: Customer, options: { form?: CustomerForm, problems?: Problems, saved?: boolean, error?: string }) {
    const viewer = viewerOf(session)
    return sendPage(reply, status, layout({
      title: customer.name,
      viewer,
      current: '/customers',
      body: html`
<p><a href="/customers">All customers</a></p>
${options.saved === true && notice('success', 'Saved.')}
${customerForm(viewer, `/customers/${customer.id}`, 'Save', options.form ?? formFromRow(customer), options.problems ?? {})}
<h2>Delete</h2>
${options.error !== undefined && notice('error', options.error)}
<p>A customer can be deleted once no phone number, agent, call, contact or knowledge base names it.</p>
<form method="post" action="/customers/${customer.id}/delete">${csrfField(viewer.csrfToken)}<button type="submit" class="danger">Delete this customer</button></form>
<p class="hint">Customer id <code>${customer.id}</code>.</p>`
    }))
  }

  app.get<{ Querystring: { deleted?: string } }>('/customers', HIDDEN, async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    return await listPage(reply, 200, session, { deleted: request.query.deleted !== undefined })
  })

  app.post('/customers', FORM_ROUTE, async (request, reply) => {
    const session = request.consoleSession!
    const form = formOf(request, FIELDS)
    const checked = check(form)
    if ('problems' in checked) return await listPage(reply, 400, session, { form, problems: checked.problems })
    const customer = await createCustomer(db, session.userId, checked.values)
    return reply.redirect(`/customers/${customer.id}?saved=1`, 303)
  })

  app.get<{ Params: { id: string }, Querystring: { saved?: string } }>('/customers/:id', HIDDEN, async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const customer = await ownCustomer(session.userId, request.params.id)
    return await customerPage(reply, 200, session, customer, { saved: request.query.saved !== undefined })
  })

  app.post<{ Params: { id: string } }>('/customers/:id', FORM_ROUTE, async (request, reply) => {
    const session = request.consoleSession!
    const customer = await ownCustomer(session.userId, request.params.id)
    const form = formOf(request, FIELDS)
    const checked = check(form)
    if ('problems' in checked) return await customerPage(reply, 400, session, customer, { form, problems: checked.problems })
    await updateCustomer(db, session.userId, customer.id, checked.values)
    return reply.redirect(`/customers/${customer.id}?saved=1`, 303)
  })

  app.post<{ Params: { id: string } }>('/customers/:id/delete', HIDDEN, async (request, reply) => {
    const session = request.consoleSession!
    const customer = await ownCustomer(session.userId, request.params.id)
    try {
      await deleteCustomer(db, session.userId, customer.id)
    } catch (err) {
      if (err instanceof HttpError && err.statusCode === 409) {
        return await customerPage(reply, 409, session, customer, { error: `Not deleted: ${err.message}.` })
      }
      throw err
    }
    return reply.redirect('/customers?deleted=1', 303)
  })
}

function customerForm (viewer: Viewer, action: string, submit: string, form: CustomerForm, problems: Problems) {
  return html`${problemsNotice(problems)}
<form method="post" action="${action}" class="stack wide">
  ${csrfField(viewer.csrfToken)}
  ${inputField({ name: 'customer_name', label: 'Name', value: form.customer_name, problems, attrs: html` maxlength="200" required` })}
  ${inputField({ name: 'email', label: 'E-mail address', value: form.email, problems, hint: 'Optional.', attrs: html` type="email" maxlength="254" autocomplete="off"` })}
  ${inputField({ name: 'phone_number', label: 'Phone number', value: form.phone_number, problems, hint: 'Optional; E.164, such as +14155550123.', attrs: html` type="tel" maxlength="16" autocomplete="off"` })}
  ${textareaField({ name: 'metadata', label: 'Metadata', value: form.metadata, problems, hint: 'Optional: a JSON object of your own data, returned by the API as given.', attrs: html` rows="4"` })}
  <button type="submit">${submit}</button>
</form>`
}
