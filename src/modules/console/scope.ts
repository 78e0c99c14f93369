import type { FastifyReply, FastifyRequest } from 'fastify'
import type { DB } from '../../db/database.ts'
import { listAgents } from '../agents/queries.ts'
import { HttpError } from '../../http/errors.ts'
import type { ConsoleSession } from './queries.ts'
import { sessionOf } from './security.ts'

/**
 * Whose records a page shows and whether it may change them: the console's one rule of workspace access
 * (docs/console.md, "Workspaces and members"). In their own account a person sees and changes all their
 * records. In a workspace they are an active member of, they see the records of the workspace's owner that
 * belong to that workspace (agents, calls, deliveries, knowledge bases), and change them as `owner` or
 * `admin`; a `member` views them (and may talk to the agents). Nothing else of the owner's is reachable.
 */
export interface Scope {
  /** The account whose records these are. */
  ownerId: string
  /** Set in a workspace: only records of this workspace. */
  workspaceId: string | undefined
  canChange: boolean
}

export function scopeOf (session: ConsoleSession): Scope {
  const workspace = session.workspace
  return workspace === undefined
    ? { ownerId: session.userId, workspaceId: undefined, canChange: true }
    : { ownerId: workspace.ownerId, workspaceId: workspace.id, canChange: workspace.role !== 'member' }
}

/** Whether a record of the scope's owner is in the scope (the owner's query has already checked `user_id`). */
export const inScope = (scope: Scope, record: { workspace_id: string | null }): boolean =>
  scope.workspaceId === undefined || record.workspace_id === scope.workspaceId

/** A page's session and scope; signed out, the browser is sent to sign in (and undefined answered). */
export function viewScope (request: FastifyRequest, reply: FastifyReply): { session: ConsoleSession, scope: Scope } | undefined {
  const session = sessionOf(request, reply)
  return session === undefined ? undefined : { session, scope: scopeOf(session) }
}

/** The scope of a form that changes records; a `member` is refused. (The CSRF check has refused a signed-out POST.) */
export function changeScope (request: FastifyRequest): Scope {
  const scope = scopeOf(request.consoleSession!)
  if (!scope.canChange) throw new HttpError(403, 'forbidden', 'You can view this workspace but not change it. Its owner can make you an admin.')
  return scope
}

// A list's agent filter offers at most this many agents; a filter by any other (or a deleted one) still works.
const MAX_AGENT_OPTIONS = 500

/** The scope's agents for a list's filter, and the fields they extract (data_retrieval) by name, for column and field choosers. */
export async function filterAgents (db: DB, scope: Scope): Promise<{ agents: Array<{ id: string, name: string }>, fields: string[] }> {
  const rows = await listAgents(db, scope.ownerId, { limit: MAX_AGENT_OPTIONS, workspace_id: scope.workspaceId })
  return {
    agents: rows.map((agent) => ({ id: agent.id, name: agent.agent_name })),
    fields: [...new Set(rows.flatMap((agent) => agent.data_retrieval.map((field) => field.name)))].sort()
  }
}
