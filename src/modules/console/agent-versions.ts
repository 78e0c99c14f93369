import type { FastifyInstance } from 'fastify'
import type { DB } from '../../db/database.ts'
import { Type } from 'typebox'
import { HttpError } from '../../http/errors.ts'
import { ObjectId } from '../../http/schemas.ts'
import { agentInScope } from './agent-capabilities.ts'
import { findAgent, lockAgent, updateAgent, type AgentRow, type VersionRow } from '../agents/queries.ts'
import { agentVersions, diffSnapshots, restoreVersion, versionOf, type AgentSnapshot, type CapabilityChanges, type MemberChange } from '../agents/versions.ts'
import { widgetSettings } from '../widget/widget.ts'
import { html, type SafeHtml } from './html.ts'
import { csrfField, layout, notice, viewerOf, when, type Viewer } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { changeScope, viewScope, type Scope } from './scope.ts'
import { formBody, idParams, page, sendPage, text } from './reply.ts'

// An agent's versions in the console (docs/agents.md, "Versions"): the history with what each version changed,
// the difference between two versions, Restore (a new version equal to an old one), and the widget's pin. They go
// through the API's functions (agents/versions.ts), with its rules.

const PAGE_SIZE = 50

const noSuchAgent = () => new HttpError(404, 'not_found', 'You have no agent with that id.')
const noSuchVersion = () => new HttpError(404, 'not_found', 'This agent has no version with that number.')

const VERSION_PATTERN = '^[1-9]\\d{0,8}$'
const VERSION = new RegExp(VERSION_PATTERN)

/** A version number as a query or path gives it; undefined when it is not one. */
function numberOf (text: unknown): number | undefined {
  return typeof text === 'string' && VERSION.test(text) ? Number(text) : undefined
}

const VersionParams = Type.Object({ id: ObjectId, version: Type.String({ pattern: VERSION_PATTERN }) })
const HistoryQuery = Type.Object({ skip: text('The page position'), restored: text('The version restored'), pinned: text('The pin') })

const CHANGE_LABELS: Record<string, string> = {
  created: 'Created', agent: 'Settings', llm: 'Language model', tools: 'Tools', actions: 'Actions', restore: 'Restored'
}
const changeLabel = (row: VersionRow) => row.restored_from === null ? CHANGE_LABELS[row.change] ?? row.change : `Restored version ${row.restored_from}`

/** A value of a diff, short: JSON text cut at 200 characters. */
function shown (value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value)
  return text.length > 200 ? `${text.slice(0, 199)}…` : text
}

function memberRows (prefix: string, changes: MemberChange[]): SafeHtml[] {
  return changes.map((change) => html`<tr><th scope="row"><code>${prefix}${change.path}</code></th><td>${shown(change.before)}</td><td>${shown(change.after)}</td></tr>`)
}

function capabilityList (noun: string, changes: CapabilityChanges): SafeHtml {
  const items = [
    ...changes.added.map((row) => html`<li>Added ${noun} <code>${row.id}</code> (${row.type})</li>`),
    ...changes.removed.map((row) => html`<li>Removed ${noun} <code>${row.id}</code> (${row.type})</li>`),
    ...changes.changed.map((row) => html`<li>Changed ${noun} <code>${row.id}</code> (${row.type}): ${row.paths.join(', ')}</li>`)
  ]
  return html`${items.length > 0 && html`<ul>${items}</ul>`}`
}

interface HistoryPage {
  viewer: Viewer
  scope: Scope
  agent: AgentRow
  versions: Array<{ row: VersionRow, changes: string[] }>
  skip: number
  hasNext: boolean
  restored?: number
  pinned?: boolean
}

function historyPage ({ viewer, scope, agent, versions, skip, hasNext, restored, pinned }: HistoryPage): string {
  const pin = widgetSettings(agent).agent_version
  const latest = agent.version
  const choices = Array.from({ length: latest }, (_, n) => latest - n)
  return layout({
    title: `Versions of ${agent.agent_name}`,
    viewer,
    current: '/agents',
    body: html`
<p><a href="/agents/${agent.id}">Back to ${agent.agent_name}</a></p>
${restored !== undefined && notice('success', `Restored: version ${latest} is version ${restored} again.`)}
${pinned === true && notice('success', 'Saved the widget\'s version.')}
<p>Every change of what the agent's calls run on (its settings, workflow, language model, tools and actions) is a new version. Calls run the latest, unless their phone number, the widget or the request names one.</p>
${versions.length === 0
  ? html`<p>No more versions.</p>`
  : html`<div class="table"><table>
  <caption>Versions ${skip + 1}–${skip + versions.length}, newest first</caption>
  <thead><tr><th scope="col">Version</th><th scope="col">When</th><th scope="col">Change</th><th scope="col">What changed</th></tr></thead>
  <tbody>${versions.map(({ row, changes }) => html`<tr>
    <td><a href="/agents/${agent.id}/versions/${row.version}">Version ${row.version}</a>${row.version === latest && ' (latest)'}</td>
    <td>${when(row.created_at)}</td>
    <td>${changeLabel(row)}</td>
    <td>${changes.length === 0 ? '—' : changes.join(', ')}</td>
  </tr>`)}</tbody>
</table></div>`}
${(skip > 0 || hasNext) && html`<nav aria-label="Pages of versions"><ul class="pager">
  ${skip > 0 && html`<li><a href="/agents/${agent.id}/versions${skip - PAGE_SIZE > 0 ? `?skip=${skip - PAGE_SIZE}` : ''}" rel="prev">Newer versions</a></li>`}
  ${hasNext && html`<li><a href="/agents/${agent.id}/versions?skip=${skip + PAGE_SIZE}" rel="next">Older versions</a></li>`}
</ul></nav>`}
<section aria-labelledby="widget-pin-title">
  <h2 id="widget-pin-title">Website widget</h2>
  <p>The widget's calls run ${pin === null ? 'the latest version' : `version ${pin}`}. Phone numbers choose theirs on their own page.</p>
  ${scope.canChange && html`<form method="post" action="/agents/${agent.id}/versions/widget-pin">${csrfField(viewer.csrfToken)}
    <label for="widget-version">The widget runs</label>
    <select id="widget-version" name="version">
      <option value=""${pin === null && html` selected`}>The latest version</option>
      ${choices.map((version) => html`<option value="${version}"${pin === version && html` selected`}>Version ${version}</option>`)}
    </select>
    <button type="submit">Save</button>
  </form>`}
</section>`
  })
}

interface VersionPage {
  viewer: Viewer
  scope: Scope
  agent: AgentRow
  row: VersionRow
  snapshot: AgentSnapshot
  against?: { row: VersionRow, snapshot: AgentSnapshot }
}

function versionPage ({ viewer, scope, agent, row, snapshot, against }: VersionPage): string {
  const diff = against === undefined ? undefined : diffSnapshots(against.snapshot, snapshot)
  const changedRows = diff === undefined ? [] : [...memberRows('', diff.agent), ...memberRows('llm.', diff.llm)]
  const others = Array.from({ length: agent.version }, (_, n) => agent.version - n).filter((version) => version !== row.version)
  return layout({
    title: `Version ${row.version} of ${agent.agent_name}`,
    viewer,
    current: '/agents',
    body: html`
<p><a href="/agents/${agent.id}/versions">All versions of ${agent.agent_name}</a></p>
<dl class="facts">
  <dt>Made</dt><dd>${when(row.created_at)}</dd>
  <dt>Change</dt><dd>${changeLabel(row)}</dd>
  <dt>Language model</dt><dd>${snapshot.llm.model}</dd>
  <dt>Tools</dt><dd>${snapshot.tools.length}</dd>
  <dt>Actions</dt><dd>${snapshot.actions.length}</dd>
</dl>
<section aria-labelledby="diff-title">
  <h2 id="diff-title">${against === undefined ? 'Differences' : `Differences from version ${against.row.version}`}</h2>
  ${others.length > 0 && html`<form method="get" action="/agents/${agent.id}/versions/${row.version}" class="inline">
    <label for="against">Compare with</label>
    <select id="against" name="against">${others.map((version) => html`<option value="${version}"${version === against?.row.version && html` selected`}>Version ${version}</option>`)}</select>
    <button type="submit">Compare</button>
  </form>`}
  ${diff === undefined
    ? html`<p>Version 1 is the first: there is nothing before it to compare with.</p>`
    : html`${changedRows.length === 0
      ? html`<p>No setting or language model value differs.</p>`
      : html`<div class="table"><table class="diff">
    <caption>Settings that differ: version ${against!.row.version}, then version ${row.version}</caption>
    <thead><tr><th scope="col">Setting</th><th scope="col">Version ${against!.row.version}</th><th scope="col">Version ${row.version}</th></tr></thead>
    <tbody>${changedRows}</tbody>
  </table></div>`}
  ${capabilityList('tool', diff.tools)}${capabilityList('action', diff.actions)}`}
</section>
${scope.canChange && row.version !== agent.version && html`<section aria-labelledby="restore-title">
  <h2 id="restore-title">Restore</h2>
  <p>Makes the agent what this version was, as a new version: its settings, language model values, tools and actions. When other agents share its language model configuration, this agent gets a copy of its own.</p>
  <form method="post" action="/agents/${agent.id}/versions/${row.version}/restore">${csrfField(viewer.csrfToken)}<button type="submit">Restore version ${row.version}</button></form>
</section>`}`
  })
}

export async function consoleVersionRoutes (app: FastifyInstance, { db }: { db: DB }): Promise<void> {
  const versionIn = async (scope: Scope, agent: AgentRow, text: string) => {
    const version = numberOf(text)
    const found = version === undefined ? undefined : await versionOf(db, scope.ownerId, agent.id, version)
    if (found === undefined) throw noSuchVersion()
    return found
  }
  const history = async (session: ConsoleSession, scope: Scope, agentId: string, query: { skip?: string, restored?: string, pinned?: string }) => {
    const skip = query.skip === undefined ? 0 : numberOf(query.skip) ?? 0
    const versions = await agentVersions(db, scope.ownerId, agentId, { limit: PAGE_SIZE + 1, skip })
    // Read after agentVersions: an agent from before versions has its version 1 now.
    const agent = (await findAgent(db, scope.ownerId, agentId))!
    return historyPage({ viewer: viewerOf(session), scope, agent, versions: versions.slice(0, PAGE_SIZE), skip, hasNext: versions.length > PAGE_SIZE, restored: numberOf(query.restored), pinned: query.pinned !== undefined })
  }

  app.get<{ Params: { id: string }, Querystring: { skip?: string, restored?: string, pinned?: string } }>('/agents/:id/versions', page({ params: idParams('id'), querystring: HistoryQuery }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const agent = await agentInScope(db, page.scope, request.params.id)
    return sendPage(reply, 200, await history(page.session, page.scope, agent.id, request.query))
  })

  app.get<{ Params: { id: string, version: string }, Querystring: { against?: string } }>('/agents/:id/versions/:version', page({ params: VersionParams, querystring: Type.Object({ against: text('The version to compare with') }) }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const agent = await agentInScope(db, page.scope, request.params.id)
    const { row, snapshot } = await versionIn(page.scope, agent, request.params.version)
    const againstText = request.query.against ?? (row.version > 1 ? String(row.version - 1) : undefined)
    const against = againstText === undefined ? undefined : await versionIn(page.scope, agent, againstText)
    const current = (await findAgent(db, page.scope.ownerId, agent.id))!
    return sendPage(reply, 200, versionPage({ viewer: viewerOf(page.session), scope: page.scope, agent: current, row, snapshot, against }))
  })

  app.post<{ Params: { id: string, version: string } }>('/agents/:id/versions/:version/restore', page({ params: VersionParams, body: formBody({}) }), async (request, reply) => {
    const scope = changeScope(request)
    const agent = await agentInScope(db, scope, request.params.id)
    const version = numberOf(request.params.version)
    const restored = version === undefined ? undefined : await restoreVersion(db, scope.ownerId, agent.id, version)
    if (restored === undefined) throw noSuchVersion()
    return reply.redirect(`/agents/${agent.id}/versions?restored=${version}`, 303)
  })

  // The widget's pin (widget_settings.agent_version): a setting of the widget, so it makes no version.
  app.post<{ Params: { id: string }, Body: { version?: string } }>('/agents/:id/versions/widget-pin', page({ params: idParams('id'), body: formBody({ version: text('The version') }) }), async (request, reply) => {
    const scope = changeScope(request)
    const agent = await agentInScope(db, scope, request.params.id)
    const text = request.body?.version ?? ''
    const version = text === '' ? null : numberOf(text)
    if (version === undefined) throw noSuchVersion()
    await db.transaction().execute(async (trx) => {
      const current = await lockAgent(trx, scope.ownerId, agent.id)
      if (current === undefined) throw noSuchAgent()
      if (version !== null && version > current.version) throw noSuchVersion()
      await updateAgent(trx, scope.ownerId, current.id, { widget_settings: { ...current.widget_settings, agent_version: version } })
    })
    return reply.redirect(`/agents/${agent.id}/versions?pinned=1`, 303)
  })
}
