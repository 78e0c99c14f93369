import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import { findAgent, listCapabilities, type AgentRow, type CapabilityRow } from '../agents/queries.ts'
import { TOOLS } from '../capabilities/catalog.ts'
import { addCapability, changeCapability, removeCapability } from '../capabilities/manage.ts'
import { knowledgeBasesOfAgents, listKnowledgeBaseRows, replaceAgentKnowledge } from '../knowledge-bases/queries.ts'
import { html, type SafeHtml } from './html.ts'
import { csrfField, type Viewer } from './pages.ts'
import { formBody, idParams, page } from './reply.ts'
import { changeScope, inScope, type Scope } from './scope.ts'

// The one place where an agent gets its knowledge (docs/console.md, "Knowledge"). Two mechanisms exist in the API:
// the knowledge base's agent assignment (PUT /v1/knowledge-base/:id/agents: what the runtime's knowledge-search
// answers) and the agent's `api_rag` tool (what the model searches during a call). Ticking a knowledge base here
// sets both, so what the page shows is what calls do: the assignment, and one search tool over the same knowledge
// bases (removed when none is ticked). The knowledge base's page lists its agents read-only, linking here.

/** The search tool's limit (capabilities/types/api-rag.ts). */
const MOST = 20
const OFFERED = 200
export const KNOWLEDGE_TOOL_NAME = 'search_knowledge'

interface KnowledgeBaseOption { id: string, name: string, description: string }
export interface KnowledgeData { offered: KnowledgeBaseOption[], chosen: string[] }

/** The knowledge bases of the page's scope and those the agent uses. */
export async function knowledgeData (db: DB, scope: Scope, agent: AgentRow): Promise<KnowledgeData> {
  const [rows, assigned] = await Promise.all([
    listKnowledgeBaseRows(db, scope.ownerId, { workspace_id: scope.workspaceId, limit: OFFERED }),
    knowledgeBasesOfAgents(db, scope.ownerId, [agent.id])
  ])
  return { offered: rows.map((row) => ({ id: row.id, name: row.name, description: row.description })), chosen: assigned.get(agent.id) ?? [] }
}

export function knowledgeView (viewer: Viewer, scope: Scope, agent: AgentRow, data: KnowledgeData, saved: boolean): SafeHtml {
  const chosen = new Set(data.chosen)
  const hidden = data.chosen.filter((id) => !data.offered.some((kb) => kb.id === id)).length
  return html`<section aria-labelledby="knowledge-title" id="knowledge">
<h2 id="knowledge-title">Knowledge</h2>
${saved && html`<p class="notice success" role="status">The knowledge bases are saved.</p>`}
<p class="hint">The agent searches the knowledge bases ticked here when a caller asks something they answer (its tool ${KNOWLEDGE_TOOL_NAME}), at most ${MOST}. Upload documents on the <a href="/knowledge-bases">Knowledge bases</a> page.</p>
${data.offered.length === 0
  ? html`<p>No knowledge bases yet: <a href="/knowledge-bases">upload a document</a> to make one.</p>`
  : html`<form method="post" action="/agents/${agent.id}/knowledge" class="stack wide">${csrfField(viewer.csrfToken)}
  <fieldset class="group"${!scope.canChange && html` disabled`}>
    <legend>Knowledge bases ${agent.agent_name} searches</legend>
    ${data.offered.map((kb) => html`<div><input type="checkbox" id="kb_${kb.id}" name="kb_${kb.id}"${chosen.has(kb.id) && html` checked`}><label for="kb_${kb.id}">${kb.name}</label> <span class="hint">${kb.description}</span></div>`)}
  </fieldset>
  ${hidden > 0 && html`<p class="hint">${hidden} more not listed here stay${hidden === 1 ? 's' : ''} chosen.</p>`}
  ${scope.canChange && html`<button type="submit">Save knowledge</button>`}
</form>`}
</section>`
}

// One checkbox per offered knowledge base: `kb_<id>=on`.
const KNOWLEDGE_FORM = Type.Object(formBody({}).properties, { patternProperties: { '^kb_[0-9a-fA-F]{24}$': Type.Literal('on') } })

export async function consoleAgentKnowledgeRoutes (app: FastifyInstance, { db }: { db: DB }): Promise<void> {
  app.post<{ Params: { id: string }, Body: Record<string, string> }>('/agents/:id/knowledge', page({ params: idParams('id'), body: KNOWLEDGE_FORM }), async (request, reply) => {
    const scope = changeScope(request)
    const agent = await findAgent(db, scope.ownerId, request.params.id)
    if (agent === undefined || !inScope(scope, agent)) throw new HttpError(404, 'not_found', 'You have no agent with that id.')
    const data = await knowledgeData(db, scope, agent)
    const offered = new Set(data.offered.map((kb) => kb.id))
    const ticked = Object.keys(request.body).flatMap((name) => /^kb_([0-9a-f]{24})$/i.exec(name)?.[1].toLowerCase() ?? [])
    if (ticked.some((id) => !offered.has(id))) throw new HttpError(404, 'not_found', 'You have no knowledge base with that id.')
    // Those the form did not offer (past the first 200) stay as they are.
    const chosen = [...new Set([...ticked, ...data.chosen.filter((id) => !offered.has(id))])]
    if (chosen.length > MOST) throw new HttpError(400, 'bad_request', `An agent searches at most ${MOST} knowledge bases: untick ${chosen.length - MOST}.`)
    await db.transaction().execute(async (trx) => await replaceAgentKnowledge(trx, scope.ownerId, agent.id, chosen))
    await syncSearchTool(db, scope.ownerId, agent, chosen)
    return reply.redirect(`/agents/${agent.id}?knowledge=saved#knowledge`, 303)
  })
}

/** One active search tool over the chosen knowledge bases, or none; each change is a version of the agent. */
async function syncSearchTool (db: DB, userId: string, agent: AgentRow, chosen: string[]): Promise<void> {
  const [first, ...others]: CapabilityRow[] = (await listCapabilities(db, userId, TOOLS, agent.id)).filter((row) => row.type === 'api_rag')
  for (const extra of chosen.length === 0 ? [first, ...others] : others) if (extra !== undefined) await removeCapability(db, userId, TOOLS, agent, extra.id)
  if (chosen.length === 0) return
  if (first === undefined) await addCapability(db, userId, TOOLS, agent, 'api_rag', { name: KNOWLEDGE_TOOL_NAME, knowledge_base_ids: chosen }, true)
  else await changeCapability(db, userId, TOOLS, agent, first.id, { settings: { knowledge_base_ids: chosen }, is_active: true })
}
