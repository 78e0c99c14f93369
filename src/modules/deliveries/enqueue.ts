import type { Transaction } from 'kysely'
import type { Logger } from 'pino'
import type { Database } from '../../db/schema.ts'
import type { CallRow } from '../calls/queries.ts'

/**
 * Stores the post-call deliveries of an analysed call, in the analysis transaction. The delivery engine
 * fills this in; until then the hook records that it ran.
 */
export async function enqueuePostCall (_trx: Transaction<Database>, deps: { log: Logger }, call: CallRow): Promise<void> {
  deps.log.info({ callId: call.id }, 'post-call hook ran')
}
