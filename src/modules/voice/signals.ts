import pg from 'pg'
import type { Logger } from 'pino'
import { sql } from 'kysely'
import { poolOf, type DB } from '../../db/database.ts'

// Signals to a live call from any process (docs/voice.md, "Voicemail"): a carrier's webhook may land on another
// process than the one holding the call's stream (several replicas behind one load balancer). One PostgreSQL
// LISTEN/NOTIFY channel carries them: every process that runs voice sessions listens on one dedicated connection
// (not one of the pool's: a LISTEN holds its connection for good) and hands each signal to its LiveCalls, which
// gives it to the session of that call if this process holds it. A signal no process holds is lost: what must
// survive (the AMD verdict) is also stored with the call, and a session reads it when it starts.

/** What the carrier's answering-machine detection said, as a session acts on it ('machine': the greeting ended, at the beep). */
export type AnsweredBy = 'human' | 'machine' | 'fax' | 'unknown'

export type CallSignal = { type: 'answered_by', answered_by: AnsweredBy }

/**
 * Twilio's AnsweredBy as a session acts on it; undefined for `machine_start` (a machine, its greeting still
 * playing: only Enable sends it, DetectMessageEnd waits for the greeting's end) and for values Twilio does not send.
 * https://www.twilio.com/docs/voice/answering-machine-detection ("Webhook parameters").
 */
export function answeredByOf (twilio: string | null): AnsweredBy | undefined {
  if (twilio === 'human' || twilio === 'fax' || twilio === 'unknown') return twilio
  return twilio !== null && /^machine_end_(beep|silence|other)$/.test(twilio) ? 'machine' : undefined
}

const CHANNEL = 'switchboard_call_signals'
/** Reconnection after a lost connection: from this, doubling up to the maximum. */
const RECONNECT_MIN_MS = 250
const RECONNECT_MAX_MS = 10_000

/** Sends a signal to the session of `callId`, wherever it runs (payload: a small JSON `{ callId, signal }`). */
export async function signalCall (db: DB, callId: string, signal: CallSignal): Promise<void> {
  await sql`SELECT pg_notify(${CHANNEL}, ${JSON.stringify({ callId, signal })})`.execute(db)
}

/** A signal as it arrives: undefined for a payload that is not one (ignored). */
export function parseSignal (payload: string | undefined): { callId: string, signal: CallSignal } | undefined {
  try {
    const { callId, signal } = JSON.parse(payload ?? '') as { callId?: unknown, signal?: { type?: unknown, answered_by?: unknown } }
    if (typeof callId !== 'string' || signal?.type !== 'answered_by') return undefined
    if (!['human', 'machine', 'fax', 'unknown'].includes(signal.answered_by as string)) return undefined
    return { callId, signal: { type: 'answered_by', answered_by: signal.answered_by as AnsweredBy } }
  } catch {
    return undefined
  }
}

/**
 * Listens on the signal channel until stopped, on its own connection (the pool's settings), reconnecting after a
 * loss. `ready` resolves once the first LISTEN is in place (or the first attempt failed: it retries meanwhile).
 */
export function listenForSignals (db: DB, log: Logger, onSignal: (callId: string, signal: CallSignal) => void): { ready: Promise<void>, stop: () => Promise<void> } {
  const { connectionString } = poolOf(db).options
  let client: pg.Client | undefined
  let stopped = false
  let retryMs = RECONNECT_MIN_MS
  let retry: NodeJS.Timeout | undefined
  const ready = Promise.withResolvers<void>()

  const connect = async () => {
    const next = new pg.Client({ connectionString })
    client = next
    const lost = (err?: Error) => {
      if (client !== next) return
      client = undefined
      next.removeAllListeners()
      next.on('error', () => {})
      void next.end().catch(() => {})
      if (stopped) return
      log.warn({ err }, `the call-signal connection was lost; reconnecting in ${retryMs} ms`)
      retry = setTimeout(() => { void connect() }, retryMs)
      retryMs = Math.min(RECONNECT_MAX_MS, retryMs * 2)
    }
    next.on('error', lost)
    next.on('end', () => lost())
    next.on('notification', (message) => {
      if (message.channel !== CHANNEL) return
      const parsed = parseSignal(message.payload)
      if (parsed !== undefined) onSignal(parsed.callId, parsed.signal)
    })
    try {
      await next.connect()
      await next.query(`LISTEN ${CHANNEL}`)
      retryMs = RECONNECT_MIN_MS
      ready.resolve()
    } catch (err) {
      // Start-up goes on: the listener keeps trying in the background.
      ready.resolve()
      lost(err as Error)
    }
  }
  void connect()
  return {
    ready: ready.promise,
    stop: async () => {
      stopped = true
      clearTimeout(retry)
      const current = client
      client = undefined
      ready.resolve()
      await current?.end().catch(() => {})
    }
  }
}
