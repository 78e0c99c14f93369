import { readFileSync } from 'node:fs'
import multipart from '@fastify/multipart'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { Type, type TSchema } from 'typebox'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { findAgent, listAgents } from '../agents/queries.ts'
import {
  campaignResultsCsv, campaignView, createCampaign, NoValidContacts, steerCampaign, toCampaign, type CampaignAction, type ImportReportAnswer
} from '../campaigns/campaigns.ts'
import { parseContactsCsv } from '../campaigns/contacts-import.ts'
import { WEEKDAYS } from '../campaigns/hours.ts'
import { campaignProgress, listCampaigns, type Progress } from '../campaigns/queries.ts'
import { CallingHours, CampaignRetrySettings, CampaignSettings, type CampaignSettingsInput } from '../campaigns/schemas.ts'
import { readUpload } from '../campaigns/upload.ts'
import { listPhoneNumbers } from '../phone-numbers/queries.ts'
import { barChart, formatNumber, type Bar } from './charts.ts'
import { describe, fieldCheck, hasProblems, integerOf, problemsNotice, type Problems } from './fields.ts'
import { dataTable, pager } from './components.ts'
import { html, type SafeHtml } from './html.ts'
import { csrfField, layout, notice, viewerOf, when, type Viewer } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { sameToken, sessionOf } from './security.ts'
import { count, formBody, idParams, openFormBody, page, sendPage, text } from './reply.ts'

// The console's campaigns (docs/campaigns.md, "The console"): the list with each campaign's progress, a form that
// creates one from a CSV file, and a campaign's page (progress bar, outcome chart, pause/resume/cancel, the results
// CSV). Everything goes through the campaigns module's own functions and schemas, so the console takes and refuses
// exactly what POST /v1/campaigns does. Campaigns are the account's (like its numbers): a page of the account, not of
// a workspace (pages.ts NAV).

const PAGE_SIZE = 50
// The deepest page position a list's address may ask for.
const MAX_SKIP = 999_999_999
/** The agents and numbers the form offers (the first by creation). */
const AGENT_OPTIONS = 200
const NUMBER_OPTIONS = 100
/** Fields of the form: 30 settings, 14 times, the CSRF token, a box per number. */
const MAX_FORM_FIELDS = 60 + NUMBER_OPTIONS

/** Gives the page that answers the form the campaign's address (static/campaigns.js). */
const SCRIPT = readFileSync(new URL('./static/campaigns.js', import.meta.url))

type Weekday = typeof WEEKDAYS[number]
const DAY_NAMES: Record<Weekday, string> = { mon: 'Monday', tue: 'Tuesday', wed: 'Wednesday', thu: 'Thursday', fri: 'Friday', sat: 'Saturday', sun: 'Sunday' }
const RETRY_OUTCOMES = ['no_answer', 'busy', 'voicemail', 'failed'] as const

const STATUS: Record<string, string> = { active: 'Active', paused: 'Paused', cancelled: 'Cancelled', completed: 'Completed' }
const REASONS: Record<string, string> = {
  agent_deleted: 'its agent was deleted',
  agent_inactive: 'its agent is inactive',
  no_numbers: 'none of its numbers is the account\'s any more',
  no_credits: 'the account has no credits and no auto top-up'
}
const OUTCOMES: Record<string, { label: string, kind: string }> = {
  success: { label: 'Talked to a person', kind: 'positive' },
  no_answer: { label: 'No answer', kind: 's4' },
  busy: { label: 'Busy', kind: 's3' },
  voicemail: { label: 'Voicemail', kind: 's5' },
  failed: { label: 'Failed', kind: 'negative' },
  do_not_call: { label: 'On the do-not-call list', kind: 's7' }
}
const ISSUES: Record<string, string> = {
  invalid_phone_number: 'Not a phone number',
  invalid_timezone: 'The timezone column names no time zone',
  value_too_long: 'A value is longer than 1,000 characters',
  wrong_column_count: 'More or fewer fields than the header'
}
const DONE: Record<string, string> = {
  pause: 'Paused: no new calls. Calls in progress go on.',
  resume: 'Resumed: calls go on within the calling hours.',
  cancel: 'Cancelled: contacts not called yet never are. Calls in progress end as they will.'
}

type Campaign = ReturnType<typeof toCampaign>
type Form = Record<string, string>
interface Choice { value: string, label: string }

const noSuchCampaign = () => new HttpError(404, 'not_found', 'You have no campaign with that id.')
const sentence = (text: string) => `${text.charAt(0).toUpperCase()}${text.slice(1)}${/[.!?]$/.test(text) ? '' : '.'}`
const plural = (n: number, one: string, many = `${one}s`) => `${formatNumber(n)} ${n === 1 ? one : many}`

/** What the form shows before anything is typed: the API's defaults. */
function emptyForm (): Form {
  const form: Form = { name: '', agent_id: '', phone_column: 'phone_number', start_at: '', timezone: 'UTC', max_concurrent_calls: '5', max_calls_per_minute: '30', ring_timeout_seconds: '', retry: 'agent', retry_max_attempts: '2', retry_delay_minutes: '60', retry_on_no_answer: 'on', retry_on_busy: 'on' }
  for (const day of WEEKDAYS.slice(0, 5)) Object.assign(form, { [`hours_${day}_start`]: '09:00', [`hours_${day}_end`]: '18:00' })
  return form
}

const fromName = (e164: string) => `from_${e164.slice(1)}`

/** `YYYY-MM-DDTHH:MM` as wall time in `zone`, as epoch ms; undefined when it is no such time. */
function zonedEpoch (local: string, zone: string): number | undefined {
  const parts = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})$/.exec(local)
  if (parts === null) return undefined
  const [year, month, day, hour, minute] = parts.slice(1).map(Number)
  const wall = Date.UTC(year, month - 1, day, hour, minute)
  if (Number.isNaN(wall) || new Date(wall).getUTCDate() !== day || hour > 23 || minute > 59) return undefined
  const format = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric' })
  const offset = (at: number) => {
    const p = Object.fromEntries(format.formatToParts(new Date(at)).map((part) => [part.type, Number(part.value)]))
    return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute) - Math.floor(at / 60_000) * 60_000
  }
  // Twice: the zone's offset at the guess may differ from the offset at the answer (a change of summer time between).
  const guess = wall - offset(wall)
  return wall - offset(guess)
}

/** A number the schema reads as one (12, 2.5), anything else as the text it is. */
const numberOf = (text: string): number | string => /^\d{1,9}(\.\d{1,6})?$/.test(text) ? Number(text) : text

const memberOf = (schema: TSchema, key: string) => (schema as unknown as { properties: Record<string, TSchema> }).properties[key]
const TIME = memberOf((memberOf(CallingHours, 'mon') as unknown as { items: TSchema }).items, 'start')

const checks = {
  name: fieldCheck('The name', memberOf(CampaignSettings, 'name')),
  phone_column: fieldCheck('The phone number column', memberOf(CampaignSettings, 'phone_column')),
  from_numbers: fieldCheck('The numbers to call from', memberOf(CampaignSettings, 'from_numbers')),
  timezone: fieldCheck('The time zone', memberOf(CampaignSettings, 'timezone')),
  max_concurrent_calls: fieldCheck('Calls at once', memberOf(CampaignSettings, 'max_concurrent_calls')),
  max_calls_per_minute: fieldCheck('New calls a minute', memberOf(CampaignSettings, 'max_calls_per_minute')),
  ring_timeout_seconds: fieldCheck('The ring time', memberOf(CampaignSettings, 'ring_timeout_seconds')),
  retry_max_attempts: fieldCheck('Calls after the first', memberOf(CampaignRetrySettings, 'max_attempts')),
  retry_delay_minutes: fieldCheck('The wait before a retry', memberOf(CampaignRetrySettings, 'retry_delay_minutes')),
  time: fieldCheck('The time', TIME, 'Write a time of day as HH:MM, such as 09:00 (24:00 for midnight at the end of the day).')
}

/**
 * The form's settings as POST /v1/campaigns takes them, or what is wrong with each field. Each value is checked by its
 * member of the API's schema; whatever needs the database (the agent, the numbers, the list) createCampaign checks.
 */
function readSettings (form: Form, agents: Choice[], numbers: string[]): { settings?: CampaignSettingsInput, problems: Problems } {
  const problems: Problems = {}
  const value = (name: string) => (form[name] ?? '').trim()
  const optional = (name: keyof typeof checks, text: string, read: (text: string) => unknown) => {
    if (text === '') return undefined
    problems[name] = checks[name](read(text))
    return read(text)
  }
  problems.name = checks.name(value('name'))
  if (!agents.some((agent) => agent.value === value('agent_id'))) problems.agent_id = 'Choose the agent that calls.'
  const from = numbers.filter((e164) => form[fromName(e164)] !== undefined)
  problems.from = from.length === 0 ? 'Choose at least one number to call from.' : checks.from_numbers(from)
  optional('phone_column', value('phone_column'), String)
  const timezone = value('timezone') === '' ? 'UTC' : value('timezone')
  problems.timezone = checks.timezone(timezone)
  const start = value('start_at') === '' || problems.timezone !== undefined ? undefined : zonedEpoch(value('start_at'), timezone)
  if (value('start_at') !== '' && start === undefined && problems.timezone === undefined) problems.start_at = 'Write the start as a date and time, such as 2026-12-01T09:00.'
  const hours: Record<string, Array<{ start: string, end: string }>> = {}
  for (const day of WEEKDAYS) {
    const [open, close] = [value(`hours_${day}_start`), value(`hours_${day}_end`)]
    if (open === '' && close === '') continue
    if (open === '' || close === '') {
      problems[`hours_${day}`] = `Give ${DAY_NAMES[day]} both times, or neither for no calls that day.`
      continue
    }
    problems[`hours_${day}`] = checks.time(open) ?? checks.time(close) ?? (open >= close ? `${DAY_NAMES[day]}'s calls must end after they start.` : undefined)
    hours[day] = [{ start: open, end: close }]
  }
  problems.max_concurrent_calls = checks.max_concurrent_calls(integerOf(value('max_concurrent_calls')))
  problems.max_calls_per_minute = checks.max_calls_per_minute(integerOf(value('max_calls_per_minute')))
  const ring = optional('ring_timeout_seconds', value('ring_timeout_seconds'), integerOf)
  let retry: CampaignSettingsInput['retry_settings']
  if (value('retry') === 'own') {
    problems.retry_max_attempts = checks.retry_max_attempts(integerOf(value('retry_max_attempts')))
    problems.retry_delay_minutes = checks.retry_delay_minutes(numberOf(value('retry_delay_minutes')))
    const outcomes = RETRY_OUTCOMES.filter((outcome) => form[`retry_on_${outcome}`] !== undefined)
    retry = { max_attempts: integerOf(value('retry_max_attempts')) as number, retry_delay_minutes: numberOf(value('retry_delay_minutes')) as number, on_outcomes: [...outcomes] }
  }
  if (hasProblems(problems)) return { problems }
  return {
    problems,
    settings: {
      name: value('name'),
      agent_id: value('agent_id'),
      ...(from.length === 1 ? { from_number: from[0] } : { from_numbers: from }),
      ...(start !== undefined && { start_at: start }),
      calling_hours: hours,
      timezone,
      max_concurrent_calls: Number(value('max_concurrent_calls')),
      max_calls_per_minute: Number(value('max_calls_per_minute')),
      ...(ring !== undefined && { ring_timeout_seconds: ring as number }),
      ...(retry !== undefined && { retry_settings: retry }),
      phone_column: value('phone_column') === '' ? 'phone_number' : value('phone_column')
    }
  }
}

/** Which field a refusal of createCampaign or of the file belongs under, in a person's words. */
function problemOfRefusal (err: HttpError): Problems | undefined {
  if (err.code === 'agent_inactive') return { agent_id: 'This agent is inactive: set it active on its page first, or choose another.' }
  if (err.statusCode === 404) return err.message.startsWith('agent') ? { agent_id: 'That agent no longer exists: choose another.' } : { from: 'A chosen number is no longer the account\'s: choose again.' }
  if (err.code === 'invalid_value') return { timezone: sentence(err.message.replace(/^body\./, 'the ')) }
  if (['invalid_csv', 'invalid_text', 'too_many_rows', 'file_too_large', 'no_valid_contacts', 'too_many_files'].includes(err.code)) return { contacts: sentence(err.message) }
  if (err.code === 'malformed_multipart') return { form: 'The form could not be read as an upload (multipart/form-data). Reload the page and send it again.' }
  if (err.code === 'too_many_fields') return { form: 'The form has too many fields. Reload the page and send it again.' }
  if (err.code === 'validation_error') return { form: sentence(err.message.replace(/^body\./, 'the field ')) }
  return undefined
}

// Views

/**
 * A campaign's progress as a bar: done (green), calling (blue), cancelled (grey) over the pending rest, with the
 * counts as text beside it (aria-valuetext says them too).
 */
function progressBar (progress: Progress, name: string): SafeHtml {
  const settled = progress.done + progress.cancelled
  const text = `${formatNumber(progress.done)} of ${formatNumber(progress.total)} done, ${formatNumber(progress.calling)} calling, ${formatNumber(progress.pending)} pending` +
    (progress.cancelled > 0 ? `, ${formatNumber(progress.cancelled)} cancelled` : '')
  const total = Math.max(1, progress.total)
  let x = 0
  const rects = (['done', 'calling', 'cancelled'] as const).map((part) => {
    const width = (progress[part] / total) * 100
    const rect = width > 0 && html`<rect class="${part}" x="${Math.round(x * 100) / 100}" y="0" width="${Math.round(width * 100) / 100}" height="1"/>`
    x += width
    return rect
  })
  return html`<div class="progress" role="progressbar" aria-label="Progress of ${name}" aria-valuemin="0" aria-valuemax="${progress.total}" aria-valuenow="${settled}" aria-valuetext="${text}">
<svg viewBox="0 0 100 1" preserveAspectRatio="none" aria-hidden="true" focusable="false"><rect class="pending" x="0" y="0" width="100" height="1"/>${rects}</svg>
</div>
<p class="progress-text">${text}</p>`
}

const PROGRESS_LEGEND = html`<ul class="legend" aria-hidden="true"><li><span class="swatch s2"></span>Done</li><li><span class="swatch s0"></span>Calling</li><li><span class="swatch s7"></span>Cancelled</li><li><span class="swatch pending"></span>Pending</li></ul>`

function statusText (campaign: Campaign): SafeHtml | string {
  const status = STATUS[campaign.status] ?? campaign.status
  if (campaign.status === 'paused' && campaign.status_reason !== null) return `${status}: ${REASONS[campaign.status_reason] ?? campaign.status_reason}`
  if (campaign.status === 'active' && campaign.start_at > Date.now()) return html`${status}, starts ${when(campaign.start_at)}`
  return status
}

function hoursText (hours: Campaign['calling_hours']): SafeHtml {
  const days = WEEKDAYS.filter((day) => (hours[day]?.length ?? 0) > 0)
  if (days.length === 0) return html`None: nobody is called`
  return html`<ul class="plain">${days.map((day) => html`<li>${DAY_NAMES[day]} ${hours[day]!.map((w) => `${w.start}–${w.end}`).join(', ')}</li>`)}</ul>`
}

function retryText (retry: Campaign['retry_settings']): string {
  if (retry === null) return 'As the agent\'s callback settings'
  if (retry.max_attempts === 0 || retry.on_outcomes.length === 0) return 'None'
  return `Up to ${plural(retry.max_attempts, 'more call')}, ${formatNumber(retry.retry_delay_minutes)} minutes apart, after: ${retry.on_outcomes.map((o) => OUTCOMES[o]?.label.toLowerCase() ?? o).join(', ')}`
}

/** An import's report: the counts, then each row left out and why. */
function reportView (report: ImportReportAnswer, heading: string, address?: string): SafeHtml {
  const rows = [
    ...report.invalid.map((issue) => ({ row: issue.row, phone: issue.phone_number, reason: ISSUES[issue.reason] ?? issue.reason })),
    ...report.duplicates.map((issue) => ({ row: issue.row, phone: issue.phone_number, reason: `The same number as row ${issue.first_row}` })),
    ...report.do_not_call.map((issue) => ({ row: issue.row, phone: issue.phone_number, reason: 'On your do-not-call list' }))
  ].sort((a, b) => a.row - b.row)
  const left = report.invalid_count + report.duplicate_count + report.do_not_call_count
  return html`<section aria-labelledby="report-title" class="report"${address !== undefined && html` data-address="${address}"`}>
<h2 id="report-title">${heading}</h2>
<p>${plural(report.rows, 'row')} in the file: ${formatNumber(report.imported)} imported, ${formatNumber(report.invalid_count)} invalid, ${plural(report.duplicate_count, 'duplicate')}, ${formatNumber(report.do_not_call_count)} on the do-not-call list.
Rows are counted from the first after the header.</p>
${rows.length > 0 && dataTable({
  caption: `Rows not imported${left > rows.length ? ` (the first ${formatNumber(rows.length)} of ${formatNumber(left)})` : ''}`,
  empty: '',
  rows,
  columns: [
    { header: 'Row', cell: (row) => row.row },
    { header: 'Phone number', cell: (row) => row.phone === '' ? '—' : row.phone },
    { header: 'Why', cell: (row) => row.reason }
  ]
})}
</section>`
}

function listPage (viewer: Viewer, campaigns: Campaign[], agentNames: Map<string, string>, skip: number, more: boolean): string {
  return layout({
    title: 'Campaigns',
    viewer,
    current: '/campaigns',
    body: html`
<p>A campaign has one of your agents call a list of contacts from a CSV file, within calling hours in each contact's
own time zone and within caps on calls at once and a minute, retrying those who did not answer.</p>
<p><a href="/campaigns/new">New campaign</a></p>
${campaigns.length === 0
  ? html`<p>${skip > 0 ? 'No more campaigns.' : html`No campaigns yet. <a href="/campaigns/new">Create a campaign</a> with an agent, one of your numbers and a CSV file of the people to call.`}</p>`
  : html`<div class="table"><table>
  <caption>Campaigns ${skip + 1}–${skip + campaigns.length}, the newest first</caption>
  <thead><tr><th scope="col">Name</th><th scope="col">Agent</th><th scope="col">Status</th><th scope="col">Progress</th><th scope="col">Created</th></tr></thead>
  <tbody>${campaigns.map((campaign) => html`<tr>
    <td><a href="/campaigns/${campaign._id}">${campaign.name}</a></td>
    <td>${agentNames.get(campaign.agent_id) ?? 'A deleted agent'}</td>
    <td>${statusText(campaign)}</td>
    <td class="progress-cell">${progressBar(campaign.progress, campaign.name)}</td>
    <td>${when(new Date(campaign.created_at))}</td>
  </tr>`)}</tbody>
</table></div>`}
${pager({
  label: 'Pages of campaigns',
  previous: skip > 0 ? { href: `/campaigns${skip - PAGE_SIZE > 0 ? `?skip=${skip - PAGE_SIZE}` : ''}`, text: 'Newer campaigns' } : undefined,
  next: more ? { href: `/campaigns?skip=${skip + PAGE_SIZE}`, text: 'Older campaigns' } : undefined
})}`
  })
}

interface FormChoices { agents: Choice[], numbers: string[], zones: string[], maxMb: number, maxRows: number }

function newPage (viewer: Viewer, choices: FormChoices, form: Form, problems: Problems, report?: ImportReportAnswer): string {
  const { agents, numbers } = choices
  const field = (name: string, hint?: string) => describe(name, hint, problems[name])
  const text = (name: string, label: string, attrs: SafeHtml, hint?: string) => {
    const d = field(name, hint)
    return html`<label for="${name}">${label}</label>
  <input id="${name}" name="${name}" value="${form[name] ?? ''}"${attrs}${d.attrs}>
  ${d.after}`
  }
  const checkbox = (name: string, label: string) => html`<div class="check"><input type="checkbox" id="${name}" name="${name}"${form[name] !== undefined && html` checked`}><label for="${name}">${label}</label></div>`
  const agent = field('agent_id', 'It speaks its begin message and prompt to each contact; the CSV\'s columns fill its {{variables}}.')
  const from = field('from', 'One number, or several used in turn (a retry comes from the next). At most 100.')
  const zone = field('timezone', 'The zone of contacts whose number does not tell theirs, and of the start time.')
  const contacts = field('contacts', `A header row with a phone number column, an optional timezone column (such as Europe/Berlin), and any other columns, which the agent's prompt uses as {{column}}. At most ${formatNumber(choices.maxRows)} rows and ${choices.maxMb} MB.`)
  const hours = describe('hours', 'In each contact\'s own time zone. Both times empty: no calls that day. End 24:00: until midnight.', undefined)
  const retryOwn = form.retry === 'own'
  const zones = choices.zones.includes(form.timezone ?? '') || (form.timezone ?? '') === '' ? choices.zones : [form.timezone, ...choices.zones]
  return layout({
    title: 'New campaign',
    viewer,
    current: '/campaigns',
    body: html`<p><a href="/campaigns">All campaigns</a></p>
${problems.form === undefined ? problemsNotice(problems) : notice('error', problems.form)}
${report !== undefined && reportView(report, 'Why no row of the file can be called')}
${agents.length === 0 || numbers.length === 0
  ? html`<p>A campaign needs ${agents.length === 0 ? html`an <a href="/agents">agent</a>` : ''}${agents.length === 0 && numbers.length === 0 ? ' and ' : ''}${numbers.length === 0 ? html`a <a href="/phone-numbers">phone number</a> of your account to call from` : ''}. Create ${agents.length + numbers.length === 0 ? 'them' : 'it'} first.</p>`
  : html`<form method="post" action="/campaigns" enctype="multipart/form-data" class="stack wide">
  ${csrfField(viewer.csrfToken)}
  ${text('name', 'Name', html` maxlength="100" required autocomplete="off"`)}
  <label for="agent_id">Agent</label>
  <select id="agent_id" name="agent_id" required${agent.attrs}>
    <option value=""${(form.agent_id ?? '') === '' && html` selected`}>Choose one</option>
    ${agents.map((a) => html`<option value="${a.value}"${a.value === form.agent_id && html` selected`}>${a.label}</option>`)}
  </select>
  ${agent.after}
  <fieldset class="choices"${from.attrs}><legend>Call from</legend>
    ${numbers.map((e164) => checkbox(fromName(e164), e164))}
  </fieldset>
  ${from.after}

  <fieldset class="group"><legend>Contacts</legend>
  <label for="contacts">CSV file</label>
  <input id="contacts" name="contacts" type="file" accept=".csv,text/csv" required${contacts.attrs}>
  ${contacts.after}
  ${text('phone_column', 'Phone number column', html` maxlength="64" autocomplete="off"`, 'The header of the column with the numbers.')}
  </fieldset>

  <fieldset class="group"><legend>When</legend>
  ${text('start_at', 'Start', html` type="datetime-local"`, 'Empty: now. In the time zone below.')}
  <label for="timezone">Time zone</label>
  <select id="timezone" name="timezone"${zone.attrs}>
    ${zones.map((z) => html`<option value="${z}"${z === (form.timezone ?? 'UTC') && html` selected`}>${z}</option>`)}
  </select>
  ${zone.after}
  <fieldset class="row hours"${hours.attrs}><legend>Calling hours</legend>
  ${hours.after}
  <div class="table"><table>
    <thead><tr><th scope="col">Day</th><th scope="col">From</th><th scope="col">Until</th></tr></thead>
    <tbody>${WEEKDAYS.map((day) => {
      const d = describe(`hours_${day}`, undefined, problems[`hours_${day}`])
      return html`<tr>
      <th scope="row">${DAY_NAMES[day]}</th>
      <td><label for="hours_${day}_start" class="visually-hidden">${DAY_NAMES[day]} from</label><input id="hours_${day}_start" name="hours_${day}_start" value="${form[`hours_${day}_start`] ?? ''}" maxlength="5"${d.attrs}></td>
      <td><label for="hours_${day}_end" class="visually-hidden">${DAY_NAMES[day]} until</label><input id="hours_${day}_end" name="hours_${day}_end" value="${form[`hours_${day}_end`] ?? ''}" maxlength="5"${d.attrs}>${d.after}</td>
    </tr>`
    })}</tbody>
  </table></div>
  </fieldset>
  </fieldset>

  <fieldset class="group"><legend>Pace</legend>
  ${text('max_concurrent_calls', 'Calls at once', html` type="number" min="1" max="10000" step="1" required`, 'At most this many calls in progress. Your account\'s limit for all campaigns applies too.')}
  ${text('max_calls_per_minute', 'New calls a minute', html` type="number" min="1" max="100000" step="1" required`)}
  ${text('ring_timeout_seconds', 'Ring time (seconds)', html` type="number" min="1" max="600" step="1"`, 'How long a call rings before it counts as not answered. Empty: the carrier\'s default.')}
  </fieldset>

  <fieldset class="group"><legend>Retries</legend>
  <div class="check"><input type="radio" id="retry-agent" name="retry" value="agent"${!retryOwn && html` checked`}><label for="retry-agent">As the agent's callback settings</label></div>
  <div class="check"><input type="radio" id="retry-own" name="retry" value="own"${retryOwn && html` checked`}><label for="retry-own">The campaign's own, as below</label></div>
  ${text('retry_max_attempts', 'Calls after the first', html` type="number" min="0" max="10" step="1"`, '0: no retries.')}
  ${text('retry_delay_minutes', 'Wait before a retry (minutes)', html` type="number" min="0" max="10080" step="any"`)}
  <fieldset class="choices"><legend>Retry after</legend>
    ${RETRY_OUTCOMES.map((outcome) => checkbox(`retry_on_${outcome}`, OUTCOMES[outcome].label))}
  </fieldset>
  </fieldset>

  <button type="submit">Create campaign</button>
</form>`}`
  })
}

function campaignPage (viewer: Viewer, campaign: Campaign, agentName: string | undefined, options: { done?: string, error?: string, report?: ImportReportAnswer }): string {
  const { progress } = campaign
  const fact = (label: string, value: string | SafeHtml) => html`<dt>${label}</dt><dd>${value}</dd>`
  const bars: Bar[] = Object.entries(progress.outcomes).map(([outcome, n]) => ({ label: OUTCOMES[outcome]?.label ?? outcome, value: n, kind: OUTCOMES[outcome]?.kind }))
  const steer = (action: CampaignAction, label: string, danger = false) => html`<form method="post" action="/campaigns/${campaign._id}/${action}">${csrfField(viewer.csrfToken)}<button type="submit"${danger && html` class="danger"`}>${label}</button></form>`
  const finished = campaign.status === 'completed' || campaign.status === 'cancelled'
  return layout({
    title: campaign.name,
    viewer,
    current: '/campaigns',
    body: html`<p><a href="/campaigns">All campaigns</a></p>
${options.report !== undefined && notice('success', `Created: ${plural(options.report.imported, 'contact')} to call.`)}
${options.done !== undefined && DONE[options.done] !== undefined && notice('success', DONE[options.done])}
${options.error !== undefined && notice('error', options.error)}
<dl class="facts">
  ${fact('Status', statusText(campaign))}
  ${fact('Agent', agentName === undefined ? 'A deleted agent' : html`<a href="/agents/${campaign.agent_id}">${agentName}</a>`)}
  ${fact('Calls from', campaign.from_numbers.join(', '))}
  ${fact('Start', when(new Date(campaign.start_at)))}
  ${fact('Calling hours', hoursText(campaign.calling_hours))}
  ${fact('Contacts\' time zones', campaign.timezones.join(', '))}
  ${fact('Pace', `At most ${plural(campaign.max_concurrent_calls, 'call')} at once and ${plural(campaign.max_calls_per_minute, 'new call')} a minute`)}
  ${fact('Retries', retryText(campaign.retry_settings))}
  ${campaign.ring_timeout_seconds !== null && fact('Ring time', `${campaign.ring_timeout_seconds} seconds`)}
  ${fact('Columns', campaign.columns.length === 0 ? '—' : campaign.columns.join(', '))}
  ${fact('Created', when(new Date(campaign.created_at)))}
  ${campaign.completed_at !== null && fact(campaign.status === 'cancelled' ? 'Cancelled' : 'Completed', when(new Date(campaign.completed_at)))}
  ${fact('Campaign id', html`<code>${campaign._id}</code>`)}
</dl>
${options.report !== undefined && html`${reportView(options.report, 'The file\'s rows', `/campaigns/${campaign._id}`)}
<p class="hint">This report is shown once: the results CSV lists every contact imported.</p>
<script src="/console/campaigns.js" defer></script>`}
<h2>Progress</h2>
${progressBar(progress, campaign.name)}
${PROGRESS_LEGEND}
<p class="hint">As it was when this page was loaded: <a href="/campaigns/${campaign._id}">reload</a> to see it now. The calls themselves are on the <a href="/calls">Calls</a> page.</p>
<h2>Outcomes</h2>
${bars.length === 0
  ? html`<p>No contact is done yet.</p>`
  : barChart({ id: 'outcomes', title: 'Done contacts by outcome', description: `${plural(progress.done, 'contact')} done: ${bars.map((bar) => `${bar.label} ${formatNumber(bar.value)}`).join(', ')}.`, labelHeader: 'Outcome', valueHeader: 'Contacts', unit: 'contacts', bars })}
<h2>Results</h2>
<p><a href="/campaigns/${campaign._id}/results.csv" download>Download results (CSV)</a>: one row per contact, with its columns, outcome, attempts, and its last call's summary and extracted fields.</p>
${!finished && html`<h2>Pause, resume or cancel</h2>
<p>Pausing stops new calls; calls in progress go on. Cancelling is final: contacts not called yet never are.</p>
<div class="actions">
  ${campaign.status === 'active' ? steer('pause', 'Pause') : steer('resume', 'Resume')}
  ${steer('cancel', 'Cancel campaign', true)}
</div>`}`
  })
}

// Routes

export async function consoleCampaignRoutes (app: FastifyInstance, { db, jobs }: { db: DB, jobs: JobSender }): Promise<void> {
  // Over the size limit the parser only cuts the file short; readUpload notices that and answers 413 (as the API does).
  await app.register(multipart, { throwFileSizeLimit: false })
  const limits = jobs.config.campaigns
  const zones = ['UTC', ...Intl.supportedValuesOf('timeZone').filter((zone) => zone !== 'UTC')]

  async function choicesOf (userId: string): Promise<FormChoices> {
    const agents = (await listAgents(db, userId, { limit: AGENT_OPTIONS })).map((agent) => ({ value: agent.id, label: agent.status === 'active' ? agent.agent_name : `${agent.agent_name} (inactive)` }))
    const numbers = (await listPhoneNumbers(db, userId, { limit: NUMBER_OPTIONS })).map((number) => number.phone_number)
    return { agents, numbers, zones, maxMb: limits.maxFileBytes / 1024 / 1024, maxRows: limits.maxRows }
  }

  async function agentNames (userId: string): Promise<Map<string, string>> {
    return new Map((await listAgents(db, userId, { limit: 10_000 })).map((agent) => [agent.id, agent.agent_name]))
  }

  async function campaignOf (userId: string, id: string): Promise<Campaign> {
    try {
      return await campaignView(db, userId, id.toLowerCase())
    } catch (err) {
      if (err instanceof HttpError && err.statusCode === 404) throw noSuchCampaign()
      throw err
    }
  }

  const showCampaign = async (reply: FastifyReply, status: number, session: ConsoleSession, campaign: Campaign, options: { done?: string, error?: string, report?: ImportReportAnswer } = {}) =>
    sendPage(reply, status, campaignPage(viewerOf(session), campaign, (await findAgent(db, session.userId, campaign.agent_id))?.agent_name, options))

  app.get('/console/campaigns.js', page(), async (_request, reply) => {
    return reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(SCRIPT)
  })

  app.get<{ Querystring: { skip?: number } }>('/campaigns', page({ querystring: Type.Object({ skip: count('The page position', MAX_SKIP) }) }), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const skip = request.query.skip ?? 0
    const rows = await listCampaigns(db, session.userId, { limit: PAGE_SIZE + 1, skip })
    const shown = rows.slice(0, PAGE_SIZE)
    const progress = await campaignProgress(db, shown.map((row) => row.id))
    const campaigns = shown.map((row) => toCampaign(row, progress.get(row.id)))
    return sendPage(reply, 200, listPage(viewerOf(session), campaigns, await agentNames(session.userId), skip, rows.length > PAGE_SIZE))
  })

  app.get('/campaigns/new', page(), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    return sendPage(reply, 200, newPage(viewerOf(session), await choicesOf(session.userId), emptyForm(), {}))
  })

  // A multipart form: it checks its CSRF token itself, as its first field, before any byte of the file is read.
  const upload = page({}, { bodyLimit: limits.maxFileBytes + 1024 * 1024, config: { multipartForm: true as const } })
  app.post('/campaigns', {
    ...upload,
    // A multipart form: its parts are read and checked one by one as they stream in (readUpload, readSettings).
    schema: { ...upload.schema, body: { content: { 'multipart/form-data': { schema: openFormBody() } } } },
    // Refused before its body is read: the connection cannot carry another request.
    onError: async (_request: FastifyRequest, reply: FastifyReply) => { reply.header('connection', 'close') }
  }, async (request, reply) => {
    const session = request.consoleSession
    if (session === undefined) throw new HttpError(403, 'forbidden', 'You are signed out. Sign in and try again.')
    const viewer = viewerOf(session)
    const choices = await choicesOf(session.userId)
    const form: Form = {}
    const refuse = (status: number, problems: Problems, report?: ImportReportAnswer) => sendPage(reply, status, newPage(viewer, choices, form, problems, report))
    let csv: string | undefined
    try {
      csv = (await readUpload(request, {
        maxFileBytes: limits.maxFileBytes,
        maxFields: MAX_FORM_FIELDS,
        firstPart: (field) => {
          if (field?.name !== 'csrf_token' || !sameToken(field.value, session.csrfToken)) throw new HttpError(403, 'forbidden', 'This form has expired. Reload the page and send it again.')
        }
      }, form)).csv
    } catch (err) {
      if (!(err instanceof HttpError) || err.statusCode === 403) throw err
      // The rest of the body is unread.
      reply.header('connection', 'close')
      const problems = problemOfRefusal(err)
      if (problems === undefined) throw err
      return refuse(err.statusCode, { ...problems, ...(problems.contacts !== undefined && { contacts: `${problems.contacts} Choose the file again.` }) })
    }
    const { settings, problems } = readSettings(form, choices.agents, choices.numbers)
    if (csv === undefined) problems.contacts = 'Choose the CSV file of the contacts to call.'
    else if (hasProblems(problems)) problems.contacts = 'Choose the file again: a browser does not keep it when the form comes back.'
    if (settings === undefined || csv === undefined) return refuse(400, problems)
    try {
      const list = await parseContactsCsv(csv, settings.phone_column ?? 'phone_number', limits.maxRows)
      const { campaign, report } = await createCampaign(db, jobs, session.userId, settings, list)
      return await showCampaign(reply, 201, session, campaign, { report })
    } catch (err) {
      if (!(err instanceof HttpError)) throw err
      const refusal = problemOfRefusal(err)
      if (refusal === undefined) throw err
      if (refusal.contacts !== undefined) refusal.contacts = `${refusal.contacts} Fix the file, then choose it again.`
      else refusal.contacts = 'Choose the file again: a browser does not keep it when the form comes back.'
      return refuse(err.statusCode, refusal, err instanceof NoValidContacts ? err.report : undefined)
    }
  })

  app.get<{ Params: { id: string }, Querystring: { done?: string } }>('/campaigns/:id', page({ params: idParams('id'), querystring: Type.Object({ done: text('The change done') }) }), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const campaign = await campaignOf(session.userId, request.params.id)
    return await showCampaign(reply, 200, session, campaign, { done: request.query.done })
  })

  for (const action of ['pause', 'resume', 'cancel'] as const) {
    app.post<{ Params: { id: string } }>(`/campaigns/:id/${action}`, page({ params: idParams('id'), body: formBody({}) }), async (request, reply) => {
      const session = request.consoleSession!
      const campaign = await campaignOf(session.userId, request.params.id)
      try {
        await steerCampaign(db, jobs, session.userId, campaign._id, action)
      } catch (err) {
        if (err instanceof HttpError && err.code === 'campaign_finished') {
          return await showCampaign(reply, 409, session, await campaignOf(session.userId, campaign._id), { error: `This campaign is ${campaign.status === 'cancelled' ? 'cancelled' : 'finished'}: it cannot be paused, resumed or cancelled any more.` })
        }
        throw err
      }
      return reply.redirect(`/campaigns/${campaign._id}?done=${action}`, 303)
    })
  }

  // The same CSV as GET /v1/campaigns/:id/results.csv, through the session.
  app.get<{ Params: { id: string } }>('/campaigns/:id/results.csv', page({ params: idParams('id') }), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const campaign = await campaignOf(session.userId, request.params.id)
    const { filename, csv } = await campaignResultsCsv(db, session.userId, campaign._id)
    reply.header('content-type', 'text/csv; charset=utf-8')
    reply.header('content-disposition', `attachment; filename="${filename}"`)
    return reply.send(csv as never) // streamed CSV text
  })
}
