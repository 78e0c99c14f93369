import type { TelnyxAccount } from '../../phone-numbers/carriers/telnyx.ts'
import type { ClientState } from './commands.ts'

// What the Telnyx webhook handlers (routes.ts, machine.ts, warm-legs.ts) share: the verified event and the words of a hang-up.

/** The Telnyx account a webhook came from: the installation's (id null) or a tenant's own (our id for it), with its API access. */
export interface Via { id: string | null, account: TelnyxAccount | undefined }

/** A signed webhook's event, read (routes.ts, verified). */
export interface TelnyxEvent { type: string, at: Date, payload: Record<string, unknown>, callControlId: string, state: ClientState | undefined, via: Via }

/**
 * A hang-up's hangup_cause (developers.telnyx.com/api-reference/callbacks/call-hangup: call_rejected,
 * normal_clearing, originator_cancel, timeout, time_limit, user_busy, not_found, no_answer, unspecified) as the
 * Twilio call status the rest of telephony speaks (calls.ts, UNANSWERED and FINAL). A callee who declines is a
 * busy line to the caller.
 */
export const HANGUP_STATUS: Record<string, string> = {
  normal_clearing: 'completed', time_limit: 'completed', user_busy: 'busy', call_rejected: 'busy', timeout: 'no-answer', no_answer: 'no-answer', originator_cancel: 'canceled', not_found: 'failed', unspecified: 'failed'
}

/** Whole seconds from one time to a later one, never negative (events may come out of order). */
export const seconds = (from: Date, to: Date) => Math.max(0, Math.round((to.getTime() - from.getTime()) / 1000))
