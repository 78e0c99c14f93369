import type { FastifyInstance } from 'fastify'
import type { DB } from '../../db/database.ts'
import { Type, type Static } from 'typebox'
import { HttpError } from '../../http/errors.ts'
import { E164, ObjectId } from '../../http/schemas.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { listAgents } from '../agents/queries.ts'
import { simulateInboundCall } from '../calls/phone-calls.ts'
import type { AvailableNumber } from '../phone-numbers/carriers/carrier.ts'
import type { Carriers } from '../phone-numbers/carriers/index.ts'
import { assignNumber, buyNumber, importNumber, releaseNumber, replaceCarrierToken, repointNumbers, searchNumbers } from '../phone-numbers/numbers.ts'
import { findPhoneNumber, listPhoneNumbers } from '../phone-numbers/queries.ts'
import { AccountSid, AreaCode, AuthToken, CarrierName, Contains, Country, Nickname, TelnyxApiKey, TelnyxPublicKey } from '../phone-numbers/schemas.ts'
import { fieldCheck, formFields, formOf, hasProblems, inputField, problemsNotice, selectField, type Problems } from './fields.ts'
import { dataTable, errorSummary } from './components.ts'
import { DRAFT_QUERY, draftOf, formSaved, refuseForm } from './drafts.ts'
import type { FormValues } from './forms.ts'
import { html } from './html.ts'
import { csrfField, layout, notice, when, viewerOf, type Viewer } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { sessionOf } from './security.ts'
import { formBody, ID, idParams, listQuery, page, sendPage, text } from './reply.ts'
import { simulateRefusal, simulateRefusalText, simulateSection } from './test-phone-call.ts'

// The console's phone numbers (docs/console.md): the account's numbers, a search of the carrier's offer with a
// Buy button per number, an import from a carrier account, and a number's page to assign its agents and
// nickname or release it. The phone-numbers module's own functions do the work, as for the API.
const LIST_LIMIT = 200
const SEARCH_LIMIT = 20

const SEARCH_FIELDS = ['country', 'area_code', 'contains'] as const
const IMPORT_FIELDS = ['phone_number', 'carrier', 'account_sid', 'auth_token', 'api_key', 'public_key', 'nickname'] as const
const ASSIGN_FIELDS = ['nickname', 'inbound_agent_id', 'outbound_agent_id', 'inbound_agent_version', 'outbound_agent_version'] as const
type SearchForm = Record<typeof SEARCH_FIELDS[number], string>
type ImportForm = Record<typeof IMPORT_FIELDS[number], string>
type AssignForm = Record<typeof ASSIGN_FIELDS[number], string>

/** A form's fields, each an optional text named by its field's name (the form's checks word the problems). */
const textFields = <F extends string>(names: readonly F[]) => Object.fromEntries(names.map((name) => [name, text(`“${name.replace(/_/g, ' ')}”`)])) as Record<F, ReturnType<typeof text>>

const noSuchNumber = () => new HttpError(404, 'not_found', 'You have no phone number with that id.')

/**
 * A refused form of a page (Post/Redirect/Get, drafts.ts): a page holds several forms and keeps one draft, so its
 * values name the form (`form`); its problems are the fields' and, under '', the form's own (a carrier's refusal).
 */
interface Refused { form: string, values: FormValues, problems: Problems }

/** The draft the page's address names, with the form it is of. */
const refusedOf = (draft: { values: FormValues, problems: Problems } | undefined): Refused | undefined =>
  draft === undefined ? undefined : { form: draft.values.form ?? '', ...draft }

/** The problems of `form` when the draft is of it, else none. */
const problemsOf = (refused: Refused | undefined, form: string): Problems => refused?.form === form ? refused.problems : {}

interface ListOptions {
  search?: SearchForm
  searchProblems?: Problems
  found?: AvailableNumber[]
  searchError?: string
  refused?: Refused
  released?: boolean
  /** How a repointing or a token replacement went. */
  outcome?: string
}

type NumberRow = Awaited<ReturnType<typeof listPhoneNumbers>>[number]
type AgentChoice = Awaited<ReturnType<typeof listAgents>>[number]

interface ListData { viewer: Viewer, numbers: NumberRow[], agents: AgentChoice[] }
interface NumberData { viewer: Viewer, number: NumberRow, agents: AgentChoice[] }
interface NumberOptions { refused?: Refused, saved?: string, simulated?: string, simulateError?: string }

// What the list's address says after a change (Post/Redirect/Get): a release, a repointing, a token replaced.
const LIST_QUERY = { released: text('Released'), repointed: text('Numbers repointed'), token_kept: text('Numbers with the new token'), draft: DRAFT_QUERY }
const SEARCH_QUERY = { country: text('The country'), area_code: text('The area code'), contains: text('The digits') }
const ListQuery = Type.Object({ ...SEARCH_QUERY, ...LIST_QUERY })
const COUNT = /^\d{1,6}$/
const numbersText = (count: number) => `${count} number${count === 1 ? '' : 's'}`

/** The outcome the list's address names. */
function listOutcome (query: Static<typeof ListQuery>): Pick<ListOptions, 'released' | 'outcome'> {
  if (query.released !== undefined) return { released: true }
  const { repointed, token_kept: kept } = query
  if (repointed !== undefined && COUNT.test(repointed)) {
    const count = Number(repointed)
    return { outcome: `${numbersText(count)} now send${count === 1 ? 's' : ''} calls to this server.` }
  }
  if (kept !== undefined && COUNT.test(kept)) return { outcome: `The new auth token is kept with ${numbersText(Number(kept))}.` }
  return {}
}

/**
 * The list's address with the search it shows (the fields set, in order): the page a refused purchase returns to,
 * so that its draft is read at the same address (drafts.ts) and the offers are searched again.
 */
function listPath (source: unknown): string {
  const asked = SEARCH_FIELDS.some((name) => (source as Record<string, unknown> | undefined)?.[name] !== undefined)
  return `/phone-numbers${asked ? listQuery(formFields(source, SEARCH_FIELDS), SEARCH_FIELDS, 0) : ''}`
}

export async function consolePhoneNumberRoutes (app: FastifyInstance, { db, jobs, carriers }: { db: DB, jobs: JobSender, carriers: Carriers }): Promise<void> {
  const checks = {
    country: fieldCheck('The country', Country, 'Give a two-letter country code such as US.'),
    area_code: fieldCheck('The area code', AreaCode, 'An area code is 2 to 4 digits, such as 415.'),
    contains: fieldCheck('The digits', Contains, 'Give 1 to 10 digits, or leave it empty.'),
    phone_number: fieldCheck('The number', E164),
    carrier: fieldCheck('The carrier', CarrierName, 'Choose one of the listed carriers.'),
    account_sid: fieldCheck('The account SID', AccountSid, 'A Twilio account SID is AC followed by 32 hexadecimal characters.'),
    auth_token: fieldCheck('The auth token', AuthToken),
    api_key: fieldCheck('The API key', TelnyxApiKey),
    public_key: fieldCheck('The public key', TelnyxPublicKey, 'The public key is the 44 characters Telnyx shows under Keys & Credentials, Public Key.'),
    nickname: fieldCheck('The nickname', Nickname),
    agent: fieldCheck('The agent', ObjectId, 'Choose one of the listed agents.'),
    version: fieldCheck('The version', Type.String({ pattern: '^[1-9][0-9]{0,8}$' }), 'Choose one of the listed versions.')
  }
  /** The checks of optional fields: an empty one is simply not given. */
  const optional = (check: (value: unknown) => string | undefined, value: string) => value === '' ? undefined : check(value)

  const agentsOf = async (userId: string) => await listAgents(db, userId, { limit: LIST_LIMIT })

  /** The list's data: the account's numbers and agents (for their names). */
  async function listData (session: ConsoleSession): Promise<ListData> {
    const [numbers, agents] = await Promise.all([listPhoneNumbers(db, session.userId, { limit: LIST_LIMIT }), agentsOf(session.userId)])
    return { viewer: viewerOf(session), numbers, agents }
  }

  function listPage ({ viewer, numbers, agents, ...options }: ListData & ListOptions): string {
    const agentName = (id: string | null) => id === null ? html`<span class="hint">none</span>` : agents.find((agent) => agent.id === id)?.agent_name ?? id
    const search = options.search ?? { country: 'US', area_code: '', contains: '' }
    const searchProblems = options.searchProblems ?? {}
    const { refused } = options
    const form: ImportForm = formFields(refused?.form === 'import' ? refused.values : {}, IMPORT_FIELDS)
    const importProblems = problemsOf(refused, 'import')
    const tokenProblems = problemsOf(refused, 'carrier-token')
    return layout({
      title: 'Phone numbers',
      viewer,
      current: '/phone-numbers',
      body: html`
${options.released === true && notice('success', 'The number is released.')}
${options.outcome !== undefined && notice('success', options.outcome)}
${dataTable({
  caption: `Your phone numbers${numbers.length === LIST_LIMIT ? ` (the first ${LIST_LIMIT})` : ''}`,
  empty: 'No phone numbers yet: buy one or import one below.',
  rows: numbers,
  columns: [
    { header: 'Number', cell: (number) => html`<a href="/phone-numbers/${number.id}">${number.phone_number}</a>` },
    { header: 'Nickname', cell: (number) => number.nickname },
    { header: 'Carrier', cell: (number) => `${number.carrier} (${number.source})` },
    { header: 'Inbound agent', cell: (number) => agentName(number.inbound_agent_id) },
    { header: 'Outbound agent', cell: (number) => agentName(number.outbound_agent_id) }
  ]
})}
<section aria-labelledby="buy-title">
<h2 id="buy-title">Buy a number</h2>
<p>Local numbers offered by this server's carrier (${carriers.purchasing}). A number bought here has its calls sent to this server.</p>
${problemsNotice(searchProblems)}
<form method="get" action="/phone-numbers" class="stack">
  ${inputField({ name: 'country', label: 'Country', value: search.country, problems: searchProblems, hint: 'Two letters, such as US, CA or GB.', attrs: html` maxlength="2" required autocomplete="off"` })}
  ${inputField({ name: 'area_code', label: 'Area code', value: search.area_code, problems: searchProblems, hint: 'Optional, such as 415.', attrs: html` maxlength="4" inputmode="numeric" autocomplete="off"` })}
  ${inputField({ name: 'contains', label: 'Digits it contains', value: search.contains, problems: searchProblems, hint: 'Optional.', attrs: html` maxlength="10" inputmode="numeric" autocomplete="off"` })}
  <button type="submit">Search</button>
</form>
${options.searchError !== undefined && notice('error', options.searchError)}
${errorSummary(problemsOf(refused, 'buy'))}
${options.found !== undefined && dataTable({
  caption: 'Numbers to buy',
  empty: html`<span role="status">No numbers match: try another area code.</span>`,
  rows: options.found,
  columns: [
    { header: 'Number', cell: (offer) => offer.phoneNumber },
    { header: 'Place', cell: (offer) => [offer.locality, offer.region, offer.country].filter(Boolean).join(', ') },
    {
      header: html`<span class="visually-hidden">Actions</span>`,
      cell: (offer) => html`<form method="post" action="/phone-numbers/buy">${csrfField(viewer.csrfToken)}
      <input type="hidden" name="phone_number" value="${offer.phoneNumber}">
      ${SEARCH_FIELDS.map((name) => html`<input type="hidden" name="${name}" value="${search[name]}">`)}
      <button type="submit" aria-label="Buy ${offer.phoneNumber}">Buy</button></form>`
    }
  ]
})}
</section>
<section aria-labelledby="import-title">
<h2 id="import-title">Import a number</h2>
<p>A number you already hold at a carrier: its calls are pointed at this server. For Twilio give the account SID and
auth token of the account holding it; for Telnyx, an API key and the public key of the account holding it. Numbers of
this server's own Twilio or Telnyx account are assigned by its operator.</p>
${errorSummary(importProblems, 'import-')}
<form method="post" action="/phone-numbers/import" class="stack">
  ${csrfField(viewer.csrfToken)}
  ${inputField({ name: 'phone_number', label: 'Number', value: form.phone_number, problems: importProblems, hint: 'E.164, such as +14155550123.', prefix: 'import-', attrs: html` type="tel" maxlength="16" required autocomplete="off"` })}
  ${selectField({
    name: 'carrier',
    label: 'Carrier',
    value: form.carrier,
    problems: importProblems,
    prefix: 'import-',
    choices: [{ value: '', label: `This server's carrier (${carriers.purchasing})` }, { value: 'twilio', label: 'Twilio' }, { value: 'telnyx', label: 'Telnyx' }, { value: 'sandbox', label: 'Sandbox' }]
  })}
  ${inputField({ name: 'account_sid', label: 'Twilio account SID', value: form.account_sid, problems: importProblems, hint: 'Optional: AC and 32 characters.', prefix: 'import-', attrs: html` maxlength="34" autocomplete="off"` })}
  ${inputField({ name: 'auth_token', label: 'Twilio auth token', value: '', problems: importProblems, hint: 'With the account SID. Kept for the carrier\'s requests and never shown again, so it is asked anew after a problem.', prefix: 'import-', attrs: html` type="password" maxlength="200" autocomplete="off"` })}
  ${inputField({ name: 'api_key', label: 'Telnyx API key', value: '', problems: importProblems, hint: 'For a number of your own Telnyx account (Mission Control: API Keys). Kept for the carrier\'s requests and never shown again, so it is asked anew after a problem.', prefix: 'import-', attrs: html` type="password" maxlength="200" autocomplete="off"` })}
  ${inputField({ name: 'public_key', label: 'Telnyx public key', value: form.public_key, problems: importProblems, hint: 'With the API key: Mission Control, Keys & Credentials, Public Key. Your account\'s calls are checked with it.', prefix: 'import-', attrs: html` maxlength="100" autocomplete="off"` })}
  ${inputField({ name: 'nickname', label: 'Nickname', value: form.nickname, problems: importProblems, hint: 'Optional, such as “front desk”.', prefix: 'import-', attrs: html` maxlength="100"` })}
  <button type="submit">Import number</button>
</form>
</section>
${numbers.some((number) => number.carrier === 'twilio') && html`<section aria-labelledby="twilio-title">
<h2 id="twilio-title">Twilio</h2>
<p>After this server's public address changed, point your Twilio numbers' calls at it again (${carriers.webhooks.voiceUrl}).</p>
${errorSummary(problemsOf(refused, 'repoint'))}
<form method="post" action="/phone-numbers/repoint">${csrfField(viewer.csrfToken)}<button type="submit">Repoint my Twilio numbers</button></form>
<p>After rotating an auth token at Twilio, give the new one: it is checked with Twilio and kept with every number you imported from that account.</p>
${errorSummary(tokenProblems, 'token-')}
<form method="post" action="/phone-numbers/carrier-token" class="stack">
  ${csrfField(viewer.csrfToken)}
  ${inputField({ name: 'account_sid', label: 'Twilio account SID', value: refused?.form === 'carrier-token' ? refused.values.account_sid ?? '' : '', problems: tokenProblems, prefix: 'token-', attrs: html` maxlength="34" required autocomplete="off"` })}
  ${inputField({ name: 'auth_token', label: 'New auth token', value: '', problems: tokenProblems, prefix: 'token-', attrs: html` type="password" maxlength="200" required autocomplete="off"` })}
  <button type="submit">Replace auth token</button>
</form>
</section>`}`
    })
  }

  /** The search's fields checked; the search itself when they pass and one was asked for. */
  async function searchOf (query: unknown): Promise<Pick<ListOptions, 'search' | 'searchProblems' | 'found' | 'searchError'>> {
    const asked = SEARCH_FIELDS.some((name) => (query as Record<string, unknown>)[name] !== undefined)
    if (!asked) return {}
    const search = formFields(query, SEARCH_FIELDS)
    const searchProblems: Problems = {
      country: checks.country(search.country),
      area_code: optional(checks.area_code, search.area_code),
      contains: optional(checks.contains, search.contains)
    }
    if (hasProblems(searchProblems)) return { search, searchProblems }
    try {
      const { numbers } = await searchNumbers(carriers, { country: search.country, area_code: search.area_code || undefined, contains: search.contains || undefined, limit: SEARCH_LIMIT })
      return { search, found: numbers }
    } catch (err) {
      if (err instanceof HttpError) return { search, searchError: `The carrier did not answer the search: ${err.message}.` }
      throw err
    }
  }

  app.get<{ Querystring: Static<typeof ListQuery> }>('/phone-numbers', page({ querystring: ListQuery }), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const searched = await searchOf(request.query)
    const status = searched.searchProblems !== undefined ? 400 : 200
    const refused = refusedOf(await draftOf(db, session, listPath(request.query), request.query.draft))
    return sendPage(reply, status, listPage({ ...await listData(session), ...searched, ...listOutcome(request.query), refused }))
  })

  /** A carrier's or the module's refusal, said on the page that asked. */
  const refusal = (err: unknown): HttpError => {
    if (err instanceof HttpError) return err
    throw err
  }

  app.post('/phone-numbers/buy', page({ body: formBody({ phone_number: text('The number'), ...SEARCH_QUERY }) }), async (request, reply) => {
    const session = request.consoleSession!
    const form = formOf(request, ['phone_number', ...SEARCH_FIELDS])
    // Back to the search it was bought from, its results shown again.
    const path = listPath(request.body)
    const refuse = async (problem: string) => await refuseForm(db, reply, session, path, { form: 'buy', ...form }, { '': problem })
    if (checks.phone_number(form.phone_number) !== undefined) return await refuse('Choose a number from the search results.')
    try {
      const row = await buyNumber(db, carriers, session.userId, { phone_number: form.phone_number }, request.log)
      await formSaved(db, session, path)
      return reply.redirect(`/phone-numbers/${row.id}?saved=bought`, 303)
    } catch (err) {
      return await refuse(`${form.phone_number} was not bought: ${refusal(err).message}.`)
    }
  })

  app.post('/phone-numbers/import', page({ body: formBody(textFields(IMPORT_FIELDS)) }), async (request, reply) => {
    const session = request.consoleSession!
    const form = formOf(request, IMPORT_FIELDS)
    const problems: Problems = {
      phone_number: checks.phone_number(form.phone_number),
      carrier: optional(checks.carrier, form.carrier),
      account_sid: optional(checks.account_sid, form.account_sid),
      auth_token: optional(checks.auth_token, form.auth_token),
      api_key: optional(checks.api_key, form.api_key),
      public_key: optional(checks.public_key, form.public_key),
      nickname: checks.nickname(form.nickname)
    }
    // The import's rules (importNumber checks them too), said where the person can act on them.
    const credentials = form.account_sid !== '' || form.auth_token !== ''
    if (form.account_sid === '' && form.auth_token !== '') problems.account_sid ??= 'Give the account SID with the auth token.'
    if (form.account_sid !== '' && form.auth_token === '') problems.auth_token ??= 'Give the auth token with the account SID.'
    if (form.carrier === 'sandbox' && credentials) problems.carrier ??= 'The sandbox takes no account SID or auth token.'
    const telnyxKeys = form.api_key !== '' || form.public_key !== ''
    if (telnyxKeys && credentials) problems.api_key ??= 'Give either Twilio\'s account SID and auth token or Telnyx\'s keys, not both.'
    if (form.api_key === '' && form.public_key !== '') problems.api_key ??= 'Give the API key with the public key.'
    if (form.api_key !== '' && form.public_key === '') problems.public_key ??= 'Give the public key with the API key.'
    if (telnyxKeys && form.carrier !== '' && form.carrier !== 'telnyx') problems.carrier ??= 'The API key and public key are for Telnyx: choose Telnyx, or leave them empty.'
    if (form.carrier === 'telnyx' && !telnyxKeys) problems.api_key ??= 'Give the API key and public key of your Telnyx account: numbers of this server\'s own account are assigned by its operator.'
    const twilio = form.carrier === 'twilio' || (form.carrier === '' && credentials)
    if (twilio && carriers.purchasing === 'sandbox') problems.carrier ??= 'This server runs the sandbox carrier: numbers cannot be imported from Twilio.'
    const chosenTwilio = form.carrier === 'twilio' || (form.carrier === '' && carriers.purchasing === 'twilio')
    if (chosenTwilio && !credentials) problems.account_sid ??= 'Give the account SID and auth token of your Twilio account: numbers of this server\'s own account are assigned by its operator.'
    // The auth token and API key are never kept nor shown again: asked anew.
    const refuse = async (refused: Problems) => await refuseForm(db, reply, session, '/phone-numbers', { form: 'import', ...form, auth_token: undefined, api_key: undefined }, refused)
    if (hasProblems(problems)) return await refuse(problems)
    try {
      const row = await importNumber(db, carriers, session.userId, {
        phone_number: form.phone_number,
        ...(form.carrier !== '' && { carrier: form.carrier as 'twilio' | 'telnyx' | 'sandbox' }),
        ...(credentials && { account_sid: form.account_sid, auth_token: form.auth_token }),
        ...(telnyxKeys && { api_key: form.api_key, public_key: form.public_key }),
        nickname: form.nickname
      })
      await formSaved(db, session, '/phone-numbers')
      return reply.redirect(`/phone-numbers/${row.id}?saved=imported`, 303)
    } catch (err) {
      return await refuse({ '': `${form.phone_number} was not imported: ${refusal(err).message}.` })
    }
  })

  app.post('/phone-numbers/repoint', page({ body: formBody({}) }), async (request, reply) => {
    const session = request.consoleSession!
    let problem: string
    try {
      const { repointed, failed } = await repointNumbers(db, carriers, session.userId)
      if (failed.length === 0) {
        await formSaved(db, session, '/phone-numbers')
        return reply.redirect(`/phone-numbers?repointed=${repointed.length}`, 303)
      }
      problem = `${repointed.length} repointed; not repointed: ${failed.map((f) => `${f.phone_number} (${f.message})`).join('; ')}.`
    } catch (err) {
      problem = `The numbers were not repointed: ${refusal(err).message}.`
    }
    return await refuseForm(db, reply, session, '/phone-numbers', { form: 'repoint' }, { '': problem })
  })

  app.post('/phone-numbers/carrier-token', page({ body: formBody(textFields(['account_sid', 'auth_token'])) }), async (request, reply) => {
    const session = request.consoleSession!
    const form = formOf(request, ['account_sid', 'auth_token'])
    const tokenProblems: Problems = { account_sid: checks.account_sid(form.account_sid), auth_token: checks.auth_token(form.auth_token) }
    // The token is never kept nor shown again.
    const refuse = async (problems: Problems) => await refuseForm(db, reply, session, '/phone-numbers', { form: 'carrier-token', account_sid: form.account_sid }, problems)
    if (hasProblems(tokenProblems)) return await refuse(tokenProblems)
    try {
      const count = await replaceCarrierToken(db, carriers, session.userId, form.account_sid, form.auth_token)
      await formSaved(db, session, '/phone-numbers')
      return reply.redirect(`/phone-numbers?token_kept=${count}`, 303)
    } catch (err) {
      return await refuse({ '': `The auth token was not replaced: ${refusal(err).message}.` })
    }
  })

  async function ownNumber (userId: string, id: string) {
    const row = await findPhoneNumber(db, userId, id)
    if (row === undefined) throw noSuchNumber()
    return row
  }

  const SAVED: Record<string, string> = {
    bought: 'Bought: the number is yours. Choose the agents that answer and place its calls.',
    imported: 'Imported: its calls come to this server now. Choose the agents that answer and place them.',
    1: 'Saved.'
  }

  function numberView ({ viewer, number, agents, ...options }: NumberData & NumberOptions): string {
    const { refused } = options
    const stored: AssignForm = {
      nickname: number.nickname,
      inbound_agent_id: number.inbound_agent_id ?? '',
      outbound_agent_id: number.outbound_agent_id ?? '',
      inbound_agent_version: String(number.inbound_agent_version ?? ''),
      outbound_agent_version: String(number.outbound_agent_version ?? '')
    }
    const form = refused?.form === 'assign' ? formFields(refused.values, ASSIGN_FIELDS) : stored
    const problems = problemsOf(refused, 'assign')
    const choices = [{ value: '', label: 'None' }, ...agents.map((agent) => ({ value: agent.id, label: agent.agent_name }))]
    // The versions of the agent saved for each direction (another agent chosen and saved clears the pin: pick then).
    const versionChoices = (agentId: string | null) => {
      const latest = agents.find((agent) => agent.id === agentId)?.version ?? 0
      return [{ value: '', label: 'The latest version' }, ...Array.from({ length: latest }, (_, n) => ({ value: String(latest - n), label: `Version ${latest - n}` }))]
    }
    const purchased = number.source === 'purchased' && number.carrier !== 'sip'
    return layout({
      title: number.phone_number,
      viewer,
      current: '/phone-numbers',
      body: html`
<p><a href="/phone-numbers">All phone numbers</a></p>
${options.saved !== undefined && SAVED[options.saved] !== undefined && notice('success', SAVED[options.saved])}
<dl class="facts">
  <dt>Carrier</dt><dd>${number.carrier}</dd>
  <dt>Source</dt><dd>${number.source}</dd>
  ${number.carrier_number_id !== null && html`<dt>Carrier's id</dt><dd><code>${number.carrier_number_id}</code></dd>`}
  <dt>Added</dt><dd>${when(number.created_at)}</dd>
</dl>
<h2>Agents and nickname</h2>
${errorSummary(problems)}
<form method="post" action="/phone-numbers/${number.id}" class="stack">
  ${csrfField(viewer.csrfToken)}
  ${inputField({ name: 'nickname', label: 'Nickname', value: form.nickname, problems, attrs: html` maxlength="100"` })}
  ${selectField({ name: 'inbound_agent_id', label: 'Inbound agent', value: form.inbound_agent_id, problems, hint: 'Answers calls to this number.', choices })}
  ${selectField({ name: 'inbound_agent_version', label: 'Inbound agent\'s version', value: form.inbound_agent_version, problems, hint: 'What calls to this number run. Another agent chosen above runs its latest version until you pick one of its versions here after saving.', choices: versionChoices(number.inbound_agent_id) })}
  ${selectField({ name: 'outbound_agent_id', label: 'Outbound agent', value: form.outbound_agent_id, problems, hint: 'Places calls from this number.', choices })}
  ${selectField({ name: 'outbound_agent_version', label: 'Outbound agent\'s version', value: form.outbound_agent_version, problems, hint: 'What calls of the outbound agent from this number run, unless the request names a version.', choices: versionChoices(number.outbound_agent_id) })}
  <button type="submit">Save</button>
</form>
${simulateSection(viewer, number, { callId: options.simulated, error: options.simulateError })}
<h2>Release</h2>
<p>${purchased ? 'The number is given back to the carrier and removed from Switchboard.' : 'The number is removed from Switchboard; it stays in your carrier account.'}</p>
${errorSummary(problemsOf(refused, 'release'))}
<form method="post" action="/phone-numbers/${number.id}/release">${csrfField(viewer.csrfToken)}<button type="submit" class="danger">Release ${number.phone_number}</button></form>
<p class="hint">Number id <code>${number.id}</code>. Customers, workspaces and SIP trunks are set through the API (<a href="/docs">API reference</a>).</p>`
    })
  }

  const NumberQuery = Type.Object({ saved: text('Saved'), simulated: text('The simulated call'), simulate_refused: text('The refusal of the simulated call'), draft: DRAFT_QUERY })
  app.get<{ Params: { id: string }, Querystring: Static<typeof NumberQuery> }>('/phone-numbers/:id', page({ params: idParams('id'), querystring: NumberQuery }), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const { saved, simulated } = request.query
    const [number, agents] = await Promise.all([ownNumber(session.userId, request.params.id), agentsOf(session.userId)])
    return sendPage(reply, 200, numberView({
      viewer: viewerOf(session),
      number,
      agents,
      saved,
      simulated: simulated !== undefined && ID.test(simulated) ? simulated : undefined,
      simulateError: simulateRefusalText(request.query.simulate_refused),
      refused: refusedOf(await draftOf(db, session, `/phone-numbers/${number.id}`, request.query.draft))
    }))
  })

  app.post<{ Params: { id: string } }>('/phone-numbers/:id', page({ params: idParams('id'), body: formBody(textFields(ASSIGN_FIELDS)) }), async (request, reply) => {
    const session = request.consoleSession!
    const number = await ownNumber(session.userId, request.params.id)
    const form = formOf(request, ASSIGN_FIELDS)
    const problems: Problems = {
      nickname: checks.nickname(form.nickname),
      inbound_agent_id: optional(checks.agent, form.inbound_agent_id),
      outbound_agent_id: optional(checks.agent, form.outbound_agent_id),
      inbound_agent_version: optional(checks.version, form.inbound_agent_version),
      outbound_agent_version: optional(checks.version, form.outbound_agent_version)
    }
    const path = `/phone-numbers/${number.id}`
    const refuse = async (refused: Problems) => await refuseForm(db, reply, session, path, { form: 'assign', ...form }, refused)
    if (hasProblems(problems)) return await refuse(problems)
    const agentOf = (id: string) => id === '' ? null : id.toLowerCase()
    // A version is of the agent saved: with another agent chosen it is left out, and the number runs that one's latest.
    const pin = (agentId: string | null, stored: string | null, version: string) => agentId !== stored ? undefined : version === '' ? null : Number(version)
    try {
      // Another account's agent is a 404, as in the API.
      await assignNumber(db, session.userId, number.id, {
        nickname: form.nickname,
        inbound_agent_id: agentOf(form.inbound_agent_id),
        outbound_agent_id: agentOf(form.outbound_agent_id),
        inbound_agent_version: pin(agentOf(form.inbound_agent_id), number.inbound_agent_id, form.inbound_agent_version),
        outbound_agent_version: pin(agentOf(form.outbound_agent_id), number.outbound_agent_id, form.outbound_agent_version)
      })
    } catch (err) {
      // A version the agent does not have, or an agent that is not the account's (a form from before a change, or
      // another account's id): said at the field; any other refusal above the form.
      const { message } = refusal(err)
      const version = /(inbound|outbound)_agent_version\)/.exec(message)?.[1]
      const agent = /^(inbound|outbound) agent not found/.exec(message)?.[1]
      if (version !== undefined) return await refuse({ [`${version}_agent_version`]: 'The agent has no such version: choose one of the list.' })
      if (agent !== undefined) return await refuse({ [`${agent}_agent_id`]: 'You have no such agent (it may have been deleted): choose one of the list.' })
      return await refuse({ '': `Not saved: ${message}.` })
    }
    await formSaved(db, session, path)
    return reply.redirect(`${path}?saved=1`, 303)
  })

  // A sandbox number's simulated inbound call (test-phone-call.ts says how).
  app.post<{ Params: { id: string } }>('/phone-numbers/:id/simulate', page({ params: idParams('id'), body: formBody({}) }), async (request, reply) => {
    const session = request.consoleSession!
    const number = await ownNumber(session.userId, request.params.id)
    try {
      const call = await simulateInboundCall(db, jobs, session.userId, number.id)
      return reply.redirect(`/phone-numbers/${number.id}?simulated=${call.id}#simulate`, 303)
    } catch (err) {
      // Post/Redirect/Get: a reload says it again and simulates nothing.
      return reply.redirect(`/phone-numbers/${number.id}?simulate_refused=${simulateRefusal(err)}#simulate`, 303)
    }
  })

  app.post<{ Params: { id: string } }>('/phone-numbers/:id/release', page({ params: idParams('id'), body: formBody({}) }), async (request, reply) => {
    const session = request.consoleSession!
    const number = await ownNumber(session.userId, request.params.id)
    try {
      await releaseNumber(db, carriers, session.userId, number.id)
    } catch (err) {
      return await refuseForm(db, reply, session, `/phone-numbers/${number.id}`, { form: 'release' }, { '': `The number was not released: ${refusal(err).message}.` })
    }
    await formSaved(db, session, `/phone-numbers/${number.id}`)
    return reply.redirect('/phone-numbers?released=1', 303)
  })
}
