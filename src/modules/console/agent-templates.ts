import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import { ObjectId } from '../../http/schemas.ts'
import { listWorkspaces } from '../account/workspace-queries.ts'
import { cloneTemplate, duplicateAgent } from '../agents/copies.ts'
import { deleteAgent, findAgent, findTemplate, listTemplates, moveAgent, type AgentRow } from '../agents/queries.ts'
import { recordVersions } from '../agents/versions.ts'
import { html, type SafeHtml } from './html.ts'
import { csrfField, layout, viewerOf, type Viewer } from './pages.ts'
import { agentDependents, type AgentDependents } from './queries.ts'
import { formBody, idParams, page, sendPage } from './reply.ts'
import { changeScope, inScope, viewScope, type Scope } from './scope.ts'

// An agent's life outside its settings form (docs/console.md, "Agents: templates, copies, deletion, workspaces"):
// "New agent" (the template catalogue or an empty form), Duplicate, Delete (after a page that says what goes with
// it) and moving it into one of the owner's workspaces. Each calls the agents module's function the API uses.

/** A button that posts nothing but its CSRF token, about the template or agent in the address. */
const BUTTON = page({ params: idParams('id'), body: formBody({}) })

type Template = Awaited<ReturnType<typeof listTemplates>>[number]
interface WorkspaceOption { id: string, name: string }

const noSuchAgent = () => new HttpError(404, 'not_found', 'You have no agent with that id.')
const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`

/** The "New agent" page: the six templates, each one button away from an agent, and the empty form. */
export function newAgentView (viewer: Viewer, templates: Template[]): string {
  return layout({
    title: 'New agent',
    viewer,
    current: '/agents',
    body: html`<p><a href="/agents">All agents</a></p>
<p>Start from a template and change what you need: each has a prompt, a begin message and the data it collects. Or start from scratch.</p>
<ul class="template-list">
${templates.map((template) => html`<li class="template">
  <h2 id="template-${template.id}">${template.agent.agent_name}</h2>
  <p>${template.description}</p>
  ${template.llm.begin_message !== undefined && template.llm.begin_message !== null && html`<p class="hint">It begins: “${template.llm.begin_message}”</p>`}
  <form method="post" action="/agents/templates/${template.id}">${csrfField(viewer.csrfToken)}<button type="submit" aria-describedby="template-${template.id}">Use this template</button></form>
</li>`)}
<li class="template">
  <h2 id="template-scratch">Start from scratch</h2>
  <p>An empty agent: you write its prompt and choose everything else.</p>
  <p><a href="/agents/new" aria-describedby="template-scratch">Open the empty form</a></p>
</li>
</ul>`
  })
}

/** The block near the top of the agent's page: Duplicate, Delete and, in the owner's own account, its workspace. */
export function agentLifeView (viewer: Viewer, scope: Scope, agent: AgentRow, workspaces: WorkspaceOption[]): SafeHtml {
  if (!scope.canChange) return html``
  const moving = scope.workspaceId === undefined && workspaces.length > 0
  return html`<div class="actions agent-life">
  <form method="post" action="/agents/${agent.id}/duplicate" class="inline">${csrfField(viewer.csrfToken)}<button type="submit">Duplicate</button></form>
  <a class="button-link" href="/agents/${agent.id}/delete">Delete…</a>
  ${moving && html`<form method="post" action="/agents/${agent.id}/move" class="inline">${csrfField(viewer.csrfToken)}
    <label for="move-workspace">Workspace</label>
    <select id="move-workspace" name="workspace_id">
      <option value=""${agent.workspace_id === null && html` selected`}>None: only you</option>
      ${workspaces.map((workspace) => html`<option value="${workspace.id}"${workspace.id === agent.workspace_id && html` selected`}>${workspace.name}</option>`)}
    </select>
    <button type="submit">Move</button>
  </form>`}
</div>`
}

/** What the agent's page shows in the block above: the owner's workspaces (none are offered in a workspace). */
export async function agentLifeData (db: DB, scope: Scope): Promise<WorkspaceOption[]> {
  if (!scope.canChange || scope.workspaceId !== undefined) return []
  return (await listWorkspaces(db, scope.ownerId, { limit: 100 })).map((workspace) => ({ id: workspace.id, name: workspace.name }))
}

/** The confirmation page of Delete: what goes with the agent, what stays, and what others lose. */
function deleteView (viewer: Viewer, agent: AgentRow, dependents: AgentDependents): string {
  const goes = [
    dependents.actions > 0 && plural(dependents.actions, 'action'),
    dependents.tools > 0 && plural(dependents.tools, 'tool'),
    dependents.tests > 0 && plural(dependents.tests, 'test') + ' and their runs',
    agent.version > 0 && plural(agent.version, 'version'),
    'its website widget key, if it has one'
  ].filter((item) => item !== false)
  return layout({
    title: `Delete ${agent.agent_name}?`,
    viewer,
    current: '/agents',
    body: html`<p><a href="/agents/${agent.id}">Back to ${agent.agent_name}</a></p>
<p>This cannot be undone. With the agent go:</p>
<ul>${goes.map((item) => html`<li>${item}</li>`)}</ul>
<p>Its calls stay, with their transcripts, recordings and results.</p>
${dependents.knowledgeBases.length > 0 && html`<p>These knowledge bases stay, without this agent: ${dependents.knowledgeBases.join(', ')}.</p>`}
${dependents.transferringAgents.length > 0 && html`<p class="notice error">These agents transfer calls to it: their transfer tools will be switched off. ${dependents.transferringAgents.join(', ')}.</p>`}
${dependents.phoneNumbers.length > 0 && html`<p class="notice error">These phone numbers use it and take no calls with it once it is deleted: choose another agent for them on the phone numbers page. ${dependents.phoneNumbers.join(', ')}.</p>`}
<div class="actions agent-life">
  <form method="post" action="/agents/${agent.id}/delete" class="inline">${csrfField(viewer.csrfToken)}<button type="submit" class="danger">Delete ${agent.agent_name}</button></form>
  <a href="/agents/${agent.id}">Keep it</a>
</div>`
  })
}

export async function consoleAgentTemplateRoutes (app: FastifyInstance, { db }: { db: DB }): Promise<void> {
  async function agentInScope (scope: Scope, id: string) {
    const agent = await findAgent(db, scope.ownerId, id)
    if (agent === undefined || !inScope(scope, agent)) throw noSuchAgent()
    return agent
  }

  app.get('/agents/start', page(), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    changeScope(request)
    return sendPage(reply, 200, newAgentView(viewerOf(page.session), await listTemplates(db)))
  })

  // The API's clone: an agent of the current workspace (or of no workspace in one's own account).
  app.post<{ Params: { id: string } }>('/agents/templates/:id', BUTTON, async (request, reply) => {
    const scope = changeScope(request)
    const template = await findTemplate(db, request.params.id)
    if (template === undefined) throw new HttpError(404, 'not_found', 'There is no template with that id.')
    const agent = await db.transaction().execute(async (trx) => await cloneTemplate(trx, scope.ownerId, template, { customer_id: null, workspace_id: scope.workspaceId ?? null }))
    return reply.redirect(`/agents/${agent.id}`, 303)
  })

  app.post<{ Params: { id: string } }>('/agents/:id/duplicate', BUTTON, async (request, reply) => {
    const scope = changeScope(request)
    const agent = await agentInScope(scope, request.params.id)
    const copy = await db.transaction().execute(async (trx) => await duplicateAgent(trx, scope.ownerId, agent))
    return reply.redirect(`/agents/${copy.id}`, 303)
  })

  app.get<{ Params: { id: string } }>('/agents/:id/delete', page({ params: idParams('id') }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const scope = changeScope(request)
    const agent = await agentInScope(scope, request.params.id)
    return sendPage(reply, 200, deleteView(viewerOf(page.session), agent, await agentDependents(db, scope.ownerId, agent.id)))
  })

  // The API's DELETE /v1/agent/:id: the same function, the same versions of the agents whose transfer tools it switches off.
  app.post<{ Params: { id: string } }>('/agents/:id/delete', BUTTON, async (request, reply) => {
    const scope = changeScope(request)
    const agent = await agentInScope(scope, request.params.id)
    await db.transaction().execute(async (trx) => {
      const switchedOff = await deleteAgent(trx, scope.ownerId, agent.id)
      if (switchedOff === undefined) throw noSuchAgent()
      await recordVersions(trx, scope.ownerId, switchedOff, 'tools')
    })
    return reply.redirect('/agents?deleted=1', 303)
  })

  // Only the owner, in their own account: moving an agent out of a workspace takes it from its members, which an
  // admin (who changes the workspace's records) should not be able to do to the owner's other workspaces.
  app.post<{ Params: { id: string }, Body: { workspace_id: string } }>('/agents/:id/move', page({ params: idParams('id'), body: formBody({ workspace_id: Type.Union([Type.Literal(''), ObjectId], { title: 'The workspace' }) }) }), async (request, reply) => {
    const scope = changeScope(request)
    if (scope.workspaceId !== undefined) throw new HttpError(403, 'forbidden', 'Agents are moved between workspaces by the owner, from their own account.')
    const agent = await agentInScope(scope, request.params.id)
    const chosen = request.body.workspace_id.toLowerCase()
    const workspaces = await agentLifeData(db, scope)
    if (chosen !== '' && !workspaces.some((workspace) => workspace.id === chosen)) throw new HttpError(404, 'not_found', 'You own no workspace with that id.')
    await moveAgent(db, scope.ownerId, agent.id, chosen === '' ? null : chosen)
    return reply.redirect(`/agents/${agent.id}?saved=1`, 303)
  })
}
