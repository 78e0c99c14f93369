import type { FastifyReply } from 'fastify'
import { ID_PATTERN } from '../../db/ids.ts'

// What every console route shares.

/** Console routes are pages, not API: they stay out of the OpenAPI document. */
export const HIDDEN = { schema: { hide: true } }

/** A record id in a console URL or form (either case, as the API takes it). */
export const ID = new RegExp(ID_PATTERN)

export const sendPage = (reply: FastifyReply, status: number, page: string): FastifyReply =>
  reply.code(status).type('text/html; charset=utf-8').send(page)
