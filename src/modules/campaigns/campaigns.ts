import { format } from 'fast-csv'
import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import { badRequest, HttpError, notFound } from '../../http/errors.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { safeCell } from '../calls/export.ts'
import { callingAgent } from '../calls/web-calls.ts'
import { findPhoneNumberByE164 } from '../phone-numbers/queries.ts'
import { checkContacts, dropListed, reportAnswer, type RawContact, type RowIssue } from './contacts-import.ts'
import { doNotCallAmong } from '../contacts/dnc.ts'
import { startTicks } from './dialler.ts'
import { DEFAULT_CALLING_HOURS, knownZone } from './hours.ts'
import { cancelPending, campaignProgress, campaignResults, findCampaign, insertCampaign, lockCampaign, updateCampaign, type CampaignRow, type Progress } from './queries.ts'
import type { CampaignSettingsInput } from './schemas.ts'

// Creating and steering campaigns: the API's and the console's one way (docs/campaigns.md).

/** A list with no contacts left to call, pause/resume/cancel of a finished campaign. */
const finished = (campaign: CampaignRow) => new HttpError(409, 'campaign_finished', `campaign ${campaign.id} is ${campaign.status}`)

export type ImportReportAnswer = ReturnType<typeof reportAnswer>

/** No row of a list can be called (422); the report says why, row by row (the console shows it on its form). */
export class NoValidContacts extends HttpError {
  readonly report: ImportReportAnswer

  constructor (report: ImportReportAnswer) {
    super(422, 'no_valid_contacts', `none of the ${report.rows} rows can be called: ${report.invalid_count} invalid, ${report.duplicate_count} duplicates, ${report.do_not_call_count} on the do-not-call list`)
    this.report = report
  }
}

/**
 * Creates a campaign from its settings and its list: checks the agent and numbers, each row (invalid numbers,
 * duplicates, numbers on the do-not-call list are reported and left out), then stores the campaign, its contacts and
 * its first tick in one transaction, so a list is imported whole or not at all.
 */
export async function createCampaign (db: DB, jobs: JobSender, userId: string, settings: CampaignSettingsInput,
  list: { contacts: RawContact[], columns: string[], badRows: RowIssue[] }) {
  const agent = await callingAgent(db, userId, settings.agent_id)
  const fromNumbers = settings.from_numbers ?? (settings.from_number === undefined ? [] : [settings.from_number])
  if (fromNumbers.length === 0) throw badRequest('body.from_number or body.from_numbers is required', 'validation_error')
  for (const e164 of fromNumbers) {
    if (await findPhoneNumberByE164(db, userId, e164) === undefined) throw notFound(`phone number ${e164} of this account`)
  }
  const defaultZone = knownZone(settings.timezone ?? 'UTC')
  if (defaultZone === undefined) throw badRequest(`body.timezone "${settings.timezone}" is not an IANA time zone`, 'invalid_value')
  const checked = checkContacts(list.contacts, list.badRows, defaultZone)
  const contacts = dropListed(checked.contacts, await doNotCallAmong(db, userId, checked.contacts.map((c) => c.phone_number)), checked.report)
  const report = reportAnswer(checked.report)
  if (contacts.length === 0) throw new NoValidContacts(report)
  const id = newId()
  const startAt = new Date(settings.start_at ?? Date.now())
  await db.transaction().execute(async (trx) => {
    await insertCampaign(trx, {
      id,
      user_id: userId,
      agent_id: agent.id,
      name: settings.name,
      from_numbers: fromNumbers,
      start_at: startAt,
      calling_hours: JSON.stringify(settings.calling_hours ?? DEFAULT_CALLING_HOURS),
      timezones: [...new Set(contacts.map((c) => c.timezone))].sort(),
      max_concurrent_calls: settings.max_concurrent_calls ?? 5,
      max_calls_per_minute: settings.max_calls_per_minute ?? 30,
      retry_settings: settings.retry_settings === undefined ? null : JSON.stringify(settings.retry_settings),
      ring_timeout_seconds: settings.ring_timeout_seconds ?? null,
      columns: list.columns
    }, contacts.map((contact) => ({
      id: newId(),
      campaign_id: id,
      user_id: userId,
      row_number: contact.row,
      phone_number: contact.phone_number,
      timezone: contact.timezone,
      columns: JSON.stringify(contact.columns),
      due_at: startAt
    })))
    await startTicks(trx, jobs, id)
  })
  return { campaign: await campaignView(db, userId, id), report }
}

export type CampaignAction = 'pause' | 'resume' | 'cancel'

/**
 * Pauses (no new calls; calls in progress go on), resumes or cancels (pending contacts are not called; calls in
 * progress end as they will) a campaign. Pausing a paused or resuming an active campaign changes nothing; a
 * completed or cancelled one answers 409.
 */
export async function steerCampaign (db: DB, jobs: JobSender, userId: string, id: string, action: CampaignAction) {
  await db.transaction().execute(async (trx) => {
    const campaign = await lockCampaign(trx, id, userId)
    if (campaign === undefined) throw notFound(`campaign ${id}`)
    if (campaign.status === 'completed' || campaign.status === 'cancelled') throw finished(campaign)
    if (action === 'pause' && campaign.status === 'active') await updateCampaign(trx, id, { status: 'paused', status_reason: null })
    if (action === 'resume' && campaign.status === 'paused') {
      await updateCampaign(trx, id, { status: 'active', status_reason: null })
      await startTicks(trx, jobs, id)
    }
    if (action === 'cancel') {
      await updateCampaign(trx, id, { status: 'cancelled', status_reason: null, completed_at: new Date() })
      await cancelPending(trx, id)
      // A tick settles the calls still in progress, then the chain rests.
      await startTicks(trx, jobs, id)
    }
  })
  return await campaignView(db, userId, id)
}

const emptyProgress: Progress = { total: 0, pending: 0, calling: 0, done: 0, cancelled: 0, outcomes: {} }

export function toCampaign (row: CampaignRow, progress: Progress | undefined) {
  return {
    _id: row.id,
    name: row.name,
    agent_id: row.agent_id,
    status: row.status,
    status_reason: row.status_reason,
    from_numbers: row.from_numbers,
    start_at: row.start_at.getTime(),
    calling_hours: row.calling_hours,
    timezones: row.timezones,
    max_concurrent_calls: row.max_concurrent_calls,
    max_calls_per_minute: row.max_calls_per_minute,
    retry_settings: row.retry_settings,
    ring_timeout_seconds: row.ring_timeout_seconds,
    columns: row.columns,
    progress: progress ?? emptyProgress,
    created_at: row.created_at.getTime(),
    updated_at: row.updated_at.getTime(),
    completed_at: row.completed_at?.getTime() ?? null
  }
}

export async function campaignView (db: DB, userId: string, id: string) {
  const row = await findCampaign(db, userId, id)
  if (row === undefined) throw notFound(`campaign ${id}`)
  return toCampaign(row, (await campaignProgress(db, [row.id])).get(row.id))
}

/**
 * A campaign's results as streamed CSV (GET /v1/campaigns/:id/results.csv and the console's download): one row per
 * contact in list order, its columns, state, outcome, attempts, last call and that call's summary and analysis.
 */
export async function campaignResultsCsv (db: DB, userId: string, id: string) {
  const campaign = await findCampaign(db, userId, id)
  if (campaign === undefined) throw new HttpError(404, 'not_found', `campaign ${id} not found`)
  const rows = await campaignResults(db, userId, campaign.id)
  const fields = [...new Set(rows.flatMap((row) => Object.keys(row.custom_analysis_data ?? {})))]
  const text = (value: unknown) => value === undefined || value === null ? '' : typeof value === 'string' ? value : JSON.stringify(value)
  const csv = format({ headers: ['phone_number', ...campaign.columns, 'timezone', 'status', 'outcome', 'attempts', 'last_call_id', 'call_summary', ...fields.map((f) => `analysis.${f}`)] })
  for (const row of rows) {
    const columns = row.columns as Record<string, string>
    csv.write([row.phone_number, ...campaign.columns.map((name) => safeCell(columns[name])), row.timezone, row.status, row.outcome ?? '', row.attempts, row.last_call_id ?? '',
      safeCell(row.call_summary), ...fields.map((f) => safeCell(text((row.custom_analysis_data as Record<string, unknown> | null)?.[f])))])
  }
  csv.end()
  return { filename: `campaign_${campaign.id}_results.csv`, csv }
}
