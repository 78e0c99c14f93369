import type { Logger } from 'pino'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import type { Mailer } from '../../mail/mailer.ts'
import { afterCallStep, readWorkflow } from '../workflows/steps.ts'
import { actionSettings, agentName, agentWorkflows, insertNotice, lockNoticeSource, noticesSince, ownerContact, setNoticeEmail } from './queries.ts'
import type { Outcome } from '../../net/request.ts'

// Failure e-mails of the specification's Events section: per the action's `notify` setting (an agent
// webhook: after the last attempt), to its `notify_email` or the account owner, in the owner's language,
// at most 10 an hour and 30 a day per source. The last one before a pause says until when it lasts.

export const LIMITS = [{ max: 10, windowMs: 3_600_000 }, { max: 30, windowMs: 86_400_000 }]

export interface FailedAttempt {
  row: { id: string, user_id: string, agent_id: string, action_id: string | null, kind: string, name: string, url: string | null, attempts_max: number }
  /** The scheduled attempt that failed, from 1. */
  n: number
  outcome: Outcome
  /** When the next attempt is due; null after the last one. */
  next: Date | null
}

export interface NotifyDeps { db: DB, mailer: Mailer, config: Pick<Config, 'publicBaseUrl' | 'delivery'>, log: Logger }

interface Texts {
  subject: (f: Facts) => string
  body: (f: Facts) => string[]
  timeout: (seconds: number) => string
  pause: (name: string, until: string) => string
}

interface Facts { name: string, agent: string, host: string, answer: string, n: number, max: number, next: string | null, keptUntil: string, log: string, resend: string }

const day = (date: Date) => date.toISOString().slice(0, 10)
const time = (date: Date) => `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`

const TEXTS: Record<'en' | 'de', Texts> = {
  en: {
    subject: (f) => f.next === null ? `Not delivered: "${f.name}" to ${f.host}` : `Delivery failed, retrying: "${f.name}" to ${f.host} (attempt ${f.n} of ${f.max})`,
    body: (f) => [
      `The post-call delivery "${f.name}" of the agent "${f.agent}" to ${f.host} failed.`,
      '',
      `The receiver's answer: ${f.answer}`,
      `Attempt ${f.n} of ${f.max}.${f.next === null ? ' This was the last attempt.' : ` The next attempt is due at ${f.next}.`}`,
      ...(f.next === null ? ['', `The request is kept until ${f.keptUntil} and can be sent again until then with "Send again" on the delivery's page below, or through the API:`, `  POST ${f.resend}`] : []),
      '',
      `Delivery log: ${f.log}`
    ],
    timeout: (seconds) => `no answer within ${seconds} s (time-out)`,
    pause: (name, until) => `This is the last failure e-mail for "${name}" until ${until}; failures are still logged meanwhile.`
  },
  de: {
    subject: (f) => f.next === null ? `Nicht zugestellt: „${f.name}“ an ${f.host}` : `Zustellung fehlgeschlagen, neuer Versuch folgt: „${f.name}“ an ${f.host} (Versuch ${f.n} von ${f.max})`,
    body: (f) => [
      `Die Zustellung „${f.name}“ nach dem Anruf des Agenten „${f.agent}“ an ${f.host} ist fehlgeschlagen.`,
      '',
      `Antwort des Empfängers: ${f.answer}`,
      `Versuch ${f.n} von ${f.max}.${f.next === null ? ' Das war der letzte Versuch.' : ` Der nächste Versuch folgt um ${f.next}.`}`,
      ...(f.next === null ? ['', `Die Anfrage wird bis ${f.keptUntil} aufbewahrt und kann bis dahin erneut gesendet werden, mit „Send again“ auf der Seite der Zustellung unten oder über die API:`, `  POST ${f.resend}`] : []),
      '',
      `Zustellprotokoll: ${f.log}`
    ],
    timeout: (seconds) => `keine Antwort innerhalb von ${seconds} s (Zeitüberschreitung)`,
    pause: (name, until) => `Dies ist die letzte Fehler-E-Mail für „${name}“ bis ${until}; Fehler werden weiterhin protokolliert.`
  }
}

function answerOf (outcome: Outcome, texts: Texts, timeoutMs: number): string {
  if (outcome.status_code !== undefined) return `HTTP ${outcome.status_code}${outcome.error === undefined ? '' : ` (${outcome.error})`}`
  if (outcome.error?.startsWith('timed out') === true) return texts.timeout(timeoutMs / 1000)
  return outcome.error ?? 'unknown error'
}

/**
 * Sends the failure e-mail a failed scheduled attempt calls for, if any. Never throws: a notice that cannot
 * be sent is logged, and the delivery goes on.
 */
export async function notifyFailure (deps: NotifyDeps, failed: FailedAttempt): Promise<void> {
  try {
    await notify(deps, failed)
  } catch (err) {
    deps.log.error({ err, deliveryRowId: failed.row.id }, 'failure e-mail could not be prepared')
  }
}

async function notify (deps: NotifyDeps, { row, n, outcome, next }: FailedAttempt): Promise<void> {
  const { db } = deps
  const stored = row.action_id === null
    ? undefined
    : row.kind === 'workflow_step'
      ? afterCallStep(readWorkflow((await agentWorkflows(db, [row.agent_id])).get(row.agent_id)), row.action_id)
      : await actionSettings(db, row.action_id)
  const settings = (stored ?? {}) as { notify?: string, notify_email?: string | null }
  const setting = settings.notify ?? 'last_attempt'
  if (setting === 'never' || (setting === 'last_attempt' && next !== null)) return

  const owner = await ownerContact(db, row.user_id)
  const agent = await agentName(db, row.agent_id)
  // A workflow step's id is its agent's own: the agent's id makes it one source.
  const sourceKey = row.action_id === null ? `agent:${row.agent_id}` : row.kind === 'workflow_step' ? `step:${row.agent_id}:${row.action_id}` : row.action_id

  // Counting and recording under a lock per source, so that concurrent failures cannot exceed the limits.
  const claim = await db.transaction().execute(async (trx) => {
    await lockNoticeSource(trx, sourceKey)
    let pauseUntil: Date | undefined
    for (const limit of LIMITS) {
      const since = new Date(Date.now() - limit.windowMs)
      const sent = await noticesSince(trx, sourceKey, since)
      if (sent.length >= limit.max) return undefined
      // This one fills the window: no more until its oldest notice leaves it.
      if (sent.length === limit.max - 1) {
        const until = new Date((sent[0]?.sent_at.getTime() ?? Date.now()) + limit.windowMs)
        if (pauseUntil === undefined || until > pauseUntil) pauseUntil = until
      }
    }
    const id = await insertNotice(trx, row.user_id, { sourceKey, deliveryRowId: row.id, final: next === null })
    return { id, pauseUntil }
  })
  if (claim === undefined) {
    deps.log.info({ deliveryRowId: row.id, sourceKey }, 'failure e-mail held back: the source reached its notification limit')
    return
  }

  const texts = owner.language.toLowerCase().startsWith('de') ? TEXTS.de : TEXTS.en
  // The console's page of the delivery: a browser that is signed out signs in and comes back to it.
  const log = `${deps.config.publicBaseUrl}/deliveries/${row.id}`
  const facts: Facts = {
    name: row.name,
    agent: agent ?? row.agent_id,
    host: row.url === null ? 'the receiver' : new URL(row.url).host,
    answer: answerOf(outcome, texts, deps.config.delivery.timeoutMs),
    n,
    max: row.attempts_max,
    next: next === null ? null : time(next),
    keptUntil: day(new Date(Date.now() + deps.config.delivery.retentionDays * 86_400_000)),
    log,
    resend: `${deps.config.publicBaseUrl}/v1/webhook-deliveries/${row.id}/resend`
  }
  const lines = texts.body(facts)
  if (claim.pauseUntil !== undefined) lines.push('', texts.pause(row.name, time(claim.pauseUntil)))
  const mail = await deps.mailer.sendMail({
    userId: row.user_id,
    kind: 'delivery_failure',
    to: settings.notify_email ?? owner.email,
    subject: texts.subject(facts),
    text: lines.join('\n')
  })
  await setNoticeEmail(db, claim.id, mail.id)
}
