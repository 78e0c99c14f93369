import type { FastifyReply } from 'fastify'
import { ID_PATTERN } from '../../db/ids.ts'
import { KEYLESS } from '../../http/rate-limit.ts'

// What every console route shares.

/** Console routes are pages, not API: they stay out of the OpenAPI document. */
export const HIDDEN = { schema: { hide: true } }

/** A page reached without a session whose token or password costs a lookup: limited per client address first. */
export const HIDDEN_KEYLESS = { ...HIDDEN, config: KEYLESS }

/** A record id in a console URL or form (either case, as the API takes it). */
export const ID = new RegExp(ID_PATTERN)

export const sendPage = (reply: FastifyReply, status: number, page: string): FastifyReply =>
  reply.code(status).type('text/html; charset=utf-8').send(page)

/** The query string of a list's filters (only those set) at `skip`: the list's paging links. */
export function listQuery<F extends string> (filters: Record<F, string>, names: readonly F[], skip: number): string {
  const params = new URLSearchParams()
  for (const name of names) if (filters[name] !== '') params.set(name, filters[name])
  if (skip > 0) params.set('skip', String(skip))
  const query = params.toString()
  return query === '' ? '' : `?${query}`
}

/** A list's agents for its filter select, plus the chosen id when it is not among them (a deleted agent's filter). */
export function withChosen (agents: Array<{ id: string, name: string }>, chosen: string): Array<{ id: string, name: string }> {
  return chosen === '' || agents.some((agent) => agent.id === chosen) ? agents : [...agents, { id: chosen, name: chosen }]
}
