import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { TSchema } from 'typebox'
import type { DB } from '../../db/database.ts'
import { ID_PATTERN } from '../../db/ids.ts'
import { HttpError, invalidInput, type AjvIssue } from '../../http/errors.ts'
import { ObjectId } from '../../http/schemas.ts'
import { compileBodySchema } from '../../http/validation.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { listVoices, voiceExists } from '../account/queries.ts'
import {
  countAgentsOfLlm, findAgent, findLlm, insertAgent, insertLlm, listAgents, lockAgent, updateAgent, updateLlm, type AgentRow
} from '../agents/queries.ts'
import { AgentUpdate, CALL_SETTINGS_DEFAULTS, LLM_DEFAULTS, LlmWrite, newAgentDefaults } from '../agents/schemas.ts'
import { startWebCall } from '../calls/web-calls.ts'
import { html, type SafeHtml } from './html.ts'
import { csrfField, layout, notice, viewerOf, when, type Viewer } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { changeScope, inScope, scopeOf, viewScope, type Scope } from './scope.ts'

// The console's agents: list, create, edit, and "Talk to this agent" (a web call in the browser). They call the
// agents' and calls' module functions, with the API's validation schemas and the same ownership rule.

/** A prompt may be 50,000 characters (LlmWrite): more than the console's usual 16 KB form, once URL-encoded. */
const AGENT_FORM_LIMIT = 512 * 1024
const LIST_LIMIT = 200
const HIDDEN = { schema: { hide: true } }
const ID = new RegExp(ID_PATTERN)

const FIELDS = ['agent_name', 'begin_message', 'general_prompt', 'language', 'voice_id', 'webhook_url', 'status'] as const
type Field = typeof FIELDS[number]
type AgentForm = Record<Field, string>
type Problems = Partial<Record<Field, string>>

/** Each field is checked by the schema the API checks it with; '' means null where the API allows null. */
const CHECKS: Array<{ field: Field, label: string, schema: TSchema, empty?: null, message?: string }> = [
  { field: 'agent_name', label: 'The name', schema: AgentUpdate.properties.agent_name },
  { field: 'begin_message', label: 'The begin message', schema: LlmWrite.properties.begin_message, empty: null },
  { field: 'general_prompt', label: 'The prompt', schema: LlmWrite.properties.general_prompt },
  { field: 'language', label: 'The language', schema: AgentUpdate.properties.call_settings.properties.language },
  { field: 'voice_id', label: 'The voice', schema: ObjectId, message: 'Choose one of the listed voices.' },
  { field: 'webhook_url', label: 'The webhook URL', schema: AgentUpdate.properties.webhook_url, empty: null },
  { field: 'status', label: 'The status', schema: AgentUpdate.properties.status, message: 'Choose active or inactive.' }
]

interface Checked {
  agent_name: string
  begin_message: string | null
  general_prompt: string
  language: string
  voice_id: string
  webhook_url: string | null
  status: 'active' | 'inactive'
}

type VoiceOption = Awaited<ReturnType<typeof listVoices>>[number]

const sendPage = (reply: FastifyReply, status: number, page: string) => reply.code(status).type('text/html; charset=utf-8').send(page)

const noSuchAgent = () => new HttpError(404, 'not_found', 'You have no agent with that id.')

function formOf (request: FastifyRequest): AgentForm {
  const body = request.body as Record<string, string | undefined>
  return Object.fromEntries(FIELDS.map((name) => [name, body[name] ?? ''])) as AgentForm
}

const formFromRows = (agent: AgentRow, llm: { begin_message: string | null, general_prompt: string }): AgentForm => ({
  agent_name: agent.agent_name,
  begin_message: llm.begin_message ?? '',
  general_prompt: llm.general_prompt,
  language: agent.call_settings.language ?? CALL_SETTINGS_DEFAULTS.language,
  voice_id: agent.voice_id,
  webhook_url: agent.webhook_url ?? '',
  status: agent.status
})

const NEW_AGENT: AgentForm = {
  agent_name: '',
  begin_message: '',
  general_prompt: '',
  language: CALL_SETTINGS_DEFAULTS.language,
  voice_id: newAgentDefaults().voice_id,
  webhook_url: '',
  status: 'active'
}

export async function consoleAgentRoutes (app: FastifyInstance, { db, jobs }: { db: DB, jobs: JobSender }): Promise<void> {
  const validators = new Map(CHECKS.map(({ field, schema }) => [field, compileBodySchema(schema)]))

  /** The form's values as the API would store them, or what is wrong with each bad field. */
  async function check (form: AgentForm): Promise<{ values: Checked } | { problems: Problems }> {
    const problems: Problems = {}
    const values: Record<string, unknown> = {}
    for (const { field, label, empty, message } of CHECKS) {
      const value = form[field] === '' && empty !== undefined ? empty : form[field]
      const validate = validators.get(field)!
      if (validate(value)) values[field] = value
      else problems[field] = message ?? (form[field] === '' ? `${label} is required.` : `${invalidInput(label, validate.errors![0] as AjvIssue).message}.`)
    }
    if (problems.voice_id === undefined && !await voiceExists(db, form.voice_id)) problems.voice_id = 'Choose one of the listed voices.'
    if (Object.keys(problems).length > 0) return { problems }
    return { values: { ...values, voice_id: form.voice_id.toLowerCase() } as Checked }
  }

  const voices = async () => await listVoices(db, { limit: 1000 })

  async function agentInScope (scope: Scope, id: string) {
    const agent = ID.test(id) ? await findAgent(db, scope.ownerId, id) : undefined
    if (agent === undefined || !inScope(scope, agent)) throw noSuchAgent()
    return agent
  }

  /** The agent's page: its form, and the button that starts a web call. */
  async function agentPage (session: ConsoleSession, agent: AgentRow, options: { form?: AgentForm, problems?: Problems, saved?: boolean, talkError?: string }) {
    const scope = scopeOf(session)
    const llm = await findLlm(db, scope.ownerId, agent.llm_id)
    const sharedWith = await countAgentsOfLlm(db, scope.ownerId, agent.llm_id) - 1
    const viewer = viewerOf(session)
    return layout({
      title: agent.agent_name,
      viewer,
      current: '/agents',
      body: html`
<p><a href="/agents">All agents</a></p>
${options.saved === true && notice('success', 'Saved.')}
<section aria-labelledby="talk-title">
  <h2 id="talk-title">Talk to this agent</h2>
  ${options.talkError !== undefined && notice('error', options.talkError)}
  <p>Starts a web call in this browser: typed turns, or your microphone when speech providers are configured.</p>
  <form method="post" action="/agents/${agent.id}/talk">${csrfField(viewer.csrfToken)}<button type="submit">Talk to this agent</button></form>
</section>
<h2>Settings</h2>
${sharedWith > 0 && html`<p class="hint">Its begin message and prompt belong to an LLM configuration that ${sharedWith} other agent${sharedWith === 1 ? '' : 's'} use${sharedWith === 1 ? 's' : ''} too: changing them here changes theirs.</p>`}
${!scope.canChange && html`<p>You are a member of this workspace: you can see this agent and talk to it, not change it.</p>`}
${agentForm({ viewer, action: `/agents/${agent.id}`, submit: scope.canChange ? 'Save' : undefined, form: options.form ?? formFromRows(agent, llm ?? LLM_DEFAULTS), problems: options.problems ?? {}, voices: await voices() })}
<p class="hint">Agent id <code>${agent.id}</code>. Tools, actions, data retrieval and the other settings are in the API (<a href="/docs">API reference</a>).</p>`
    })
  }

  // The agent forms may be longer than the console's other forms (the prompt).
  const FORM_ROUTE = { ...HIDDEN, bodyLimit: AGENT_FORM_LIMIT }

  app.get('/agents', HIDDEN, async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const { session, scope } = page
    const [agents, catalogue] = await Promise.all([listAgents(db, scope.ownerId, { limit: LIST_LIMIT, workspace_id: scope.workspaceId }), voices()])
    const voiceNames = new Map(catalogue.map((voice) => [voice.id, voice.name]))
    return sendPage(reply, 200, layout({
      title: 'Agents',
      viewer: viewerOf(session),
      current: '/agents',
      body: html`
${scope.canChange && html`<p><a href="/agents/new">New agent</a></p>`}
${agents.length === 0
  ? html`<p>No agents yet.</p>`
  : html`<div class="table"><table>
  <caption>Your agents${agents.length === LIST_LIMIT && html` (the first ${LIST_LIMIT})`}</caption>
  <thead><tr><th scope="col">Name</th><th scope="col">Status</th><th scope="col">Language</th><th scope="col">Voice</th><th scope="col">Updated</th></tr></thead>
  <tbody>${agents.map((agent) => html`<tr>
    <td><a href="/agents/${agent.id}">${agent.agent_name}</a></td><td>${agent.status}</td><td>${agent.call_settings.language ?? CALL_SETTINGS_DEFAULTS.language}</td><td>${voiceNames.get(agent.voice_id) ?? agent.voice_id}</td><td>${when(agent.updated_at)}</td>
  </tr>`)}</tbody>
</table></div>`}`
    }))
  })

  const newPage = async (session: ConsoleSession, form: AgentForm, problems: Problems) => layout({
    title: 'New agent',
    viewer: viewerOf(session),
    current: '/agents',
    body: html`<p><a href="/agents">All agents</a></p>
${agentForm({ viewer: viewerOf(session), action: '/agents', submit: 'Create agent', form, problems, voices: await voices() })}`
  })

  app.get('/agents/new', HIDDEN, async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    if (!page.scope.canChange) return changeScope(request)
    return sendPage(reply, 200, await newPage(page.session, NEW_AGENT, {}))
  })

  app.post('/agents', FORM_ROUTE, async (request, reply) => {
    const session = request.consoleSession!
    const scope = changeScope(request)
    const form = formOf(request)
    const checked = await check(form)
    if ('problems' in checked) return sendPage(reply, 400, await newPage(session, form, checked.problems))
    const { values } = checked
    const agent = await db.transaction().execute(async (trx) => {
      const llm = await insertLlm(trx, scope.ownerId, { ...LLM_DEFAULTS, begin_message: values.begin_message, general_prompt: values.general_prompt })
      const row = await insertAgent(trx, scope.ownerId, {
        ...newAgentDefaults(),
        customer_id: null,
        workspace_id: scope.workspaceId ?? null,
        agent_name: values.agent_name,
        llm_id: llm.id,
        voice_id: values.voice_id,
        call_settings: { ...CALL_SETTINGS_DEFAULTS, language: values.language },
        data_retrieval: [],
        webhook_url: values.webhook_url
      })
      // A new agent is active; the API's create has no status either, its PATCH sets it.
      return values.status === 'active' ? row : await updateAgent(trx, scope.ownerId, row.id, { status: values.status })
    })
    return reply.redirect(`/agents/${agent.id}?saved=1`, 303)
  })

  app.get<{ Params: { id: string }, Querystring: { saved?: string } }>('/agents/:id', HIDDEN, async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const agent = await agentInScope(page.scope, request.params.id)
    return sendPage(reply, 200, await agentPage(page.session, agent, { saved: request.query.saved !== undefined }))
  })

  app.post<{ Params: { id: string } }>('/agents/:id', FORM_ROUTE, async (request, reply) => {
    const session = request.consoleSession!
    const scope = changeScope(request)
    const agent = await agentInScope(scope, request.params.id)
    const form = formOf(request)
    const checked = await check(form)
    if ('problems' in checked) return sendPage(reply, 400, await agentPage(session, agent, { form, problems: checked.problems }))
    const { values } = checked
    await db.transaction().execute(async (trx) => {
      // Locked as the API's PATCH does, so that call_settings merge with a concurrent change.
      const current = await lockAgent(trx, scope.ownerId, agent.id)
      if (current === undefined) throw noSuchAgent()
      await updateLlm(trx, scope.ownerId, current.llm_id, { begin_message: values.begin_message, general_prompt: values.general_prompt })
      await updateAgent(trx, scope.ownerId, current.id, {
        agent_name: values.agent_name,
        voice_id: values.voice_id,
        webhook_url: values.webhook_url,
        status: values.status,
        call_settings: { ...current.call_settings, language: values.language }
      })
    })
    return reply.redirect(`/agents/${agent.id}?saved=1`, 303)
  })

  app.post<{ Params: { id: string } }>('/agents/:id/talk', HIDDEN, async (request, reply) => {
    // A member may talk to the workspace's agents: a call changes no setting (its credits are the owner's).
    const session = request.consoleSession!
    const scope = scopeOf(session)
    const agent = await agentInScope(scope, request.params.id)
    let started
    try {
      started = await startWebCall(db, jobs, scope.ownerId, { agent_id: agent.id })
    } catch (err) {
      if (err instanceof HttpError && err.statusCode === 409) return sendPage(reply, 409, await agentPage(session, agent, { talkError: `No call: ${err.message}.` }))
      throw err
    }
    // In the fragment: browsers do not send it, so the token reaches no request line, log or Referer.
    return reply.redirect(`/web-call#access_token=${encodeURIComponent(started.access_token)}`, 303)
  })
}

interface FormOptions { viewer: Viewer, action: string, /** undefined: the form is shown read-only */ submit: string | undefined, form: AgentForm, problems: Problems, voices: VoiceOption[] }

const HINTS: Partial<Record<Field, string>> = {
  begin_message: 'What the agent says first. Empty: it waits for the other party to speak.',
  general_prompt: 'Who the agent is and what it should do (the system prompt).',
  language: 'A BCP-47 language tag such as en-US or de-DE.',
  webhook_url: 'Optional: receives each call\'s result when the call has ended.',
  status: 'An inactive agent takes no calls.'
}

/**
 * The agent's fields; a bad one carries its message, tied to the input by aria-describedby. A textarea's text
 * starts after a line break, which the HTML parser drops, so that text starting with one keeps it.
 */
function agentForm ({ viewer, action, submit, form, problems, voices }: FormOptions): SafeHtml {
  const described = (field: Field) => {
    const ids = [HINTS[field] !== undefined && `${field}-hint`, problems[field] !== undefined && `${field}-error`].filter(Boolean).join(' ')
    return html`${ids !== '' && html` aria-describedby="${ids}"`}${problems[field] !== undefined && html` aria-invalid="true"`}`
  }
  const after = (field: Field) => html`${HINTS[field] !== undefined && html`<p id="${field}-hint" class="hint">${HINTS[field]}</p>`}
  ${problems[field] !== undefined && html`<p id="${field}-error" class="field-error">${problems[field]}</p>`}`
  const known = voices.some((voice) => voice.id === form.voice_id.toLowerCase())
  return html`${Object.keys(problems).length > 0 && notice('error', 'Some fields need another look: see the messages below them.')}
<form method="post" action="${action}" class="stack wide">
  ${csrfField(viewer.csrfToken)}
  <fieldset class="plain"${submit === undefined && html` disabled`}>
  <legend class="visually-hidden">Agent settings</legend>
  <label for="agent_name">Name</label>
  <input id="agent_name" name="agent_name" value="${form.agent_name}" maxlength="200" required${described('agent_name')}>
  ${after('agent_name')}
  <label for="begin_message">Begin message</label>
  <textarea id="begin_message" name="begin_message" rows="2" maxlength="2000"${described('begin_message')}>
${form.begin_message}</textarea>
  ${after('begin_message')}
  <label for="general_prompt">Prompt</label>
  <textarea id="general_prompt" name="general_prompt" rows="10" maxlength="50000"${described('general_prompt')}>
${form.general_prompt}</textarea>
  ${after('general_prompt')}
  <label for="language">Language</label>
  <input id="language" name="language" value="${form.language}" maxlength="35" required autocomplete="off"${described('language')}>
  ${after('language')}
  <label for="voice_id">Voice</label>
  <select id="voice_id" name="voice_id"${described('voice_id')}>
    ${!known && html`<option value="${form.voice_id}" selected>Choose a voice</option>`}
    ${voices.map((voice) => html`<option value="${voice.id}"${voice.id === form.voice_id.toLowerCase() && html` selected`}>${voice.name} (${voice.provider}, ${voice.gender}, ${voice.languages.join(', ')})</option>`)}
  </select>
  ${after('voice_id')}
  <label for="webhook_url">Webhook URL</label>
  <input id="webhook_url" name="webhook_url" type="url" value="${form.webhook_url}" maxlength="2000" inputmode="url"${described('webhook_url')}>
  ${after('webhook_url')}
  <label for="status">Status</label>
  <select id="status" name="status"${described('status')}>
    ${['active', 'inactive'].map((status) => html`<option value="${status}"${status === form.status && html` selected`}>${status}</option>`)}
  </select>
  ${after('status')}
  </fieldset>
  ${submit !== undefined && html`<button type="submit">${submit}</button>`}
</form>`
}
