import { Type, type Static } from 'typebox'
import { COMPONENT, E164, EpochMs, Nullable, ObjectId } from '../../http/schemas.ts'
import { WEEKDAYS } from './hours.ts'

// The campaigns API's shapes (docs/campaigns.md).

const Time = (description: string) => Type.String({ pattern: '^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$', description })

const CallingWindow = Type.Object({ start: Time('local time "HH:MM" the window opens'), end: Time('local time "HH:MM" it closes (exclusive; "24:00" for midnight)') })

export const CallingHours = Type.Object(
  Object.fromEntries(WEEKDAYS.map((day) => [day, Type.Optional(Type.Array(CallingWindow, { maxItems: 10 }))])) as Record<typeof WEEKDAYS[number], ReturnType<typeof Type.Optional<ReturnType<typeof Type.Array<typeof CallingWindow>>>>>,
  { [COMPONENT]: 'CallingHours', description: 'Per weekday (mon … sun) the windows when contacts may be called, in each contact\'s own time zone; a day left out: none. Default: mon-fri 09:00-18:00.' }
)

const RetryOutcome = Type.Union([Type.Literal('no_answer'), Type.Literal('busy'), Type.Literal('voicemail'), Type.Literal('failed')])

export const CampaignRetrySettings = Type.Object({
  max_attempts: Type.Integer({ minimum: 0, maximum: 10, description: 'calls after the first (0: no retries)' }),
  retry_delay_minutes: Type.Number({ minimum: 0, maximum: 10_080, description: 'pause before a retry (times CALL_TIME_SCALE)' }),
  on_outcomes: Type.Array(RetryOutcome, { uniqueItems: true, maxItems: 4, description: 'outcomes that are retried' })
}, { [COMPONENT]: 'CampaignRetrySettings' })

/** What a campaign is created with, besides its contacts (a JSON body's members, or a CSV upload's `settings`). */
export const CampaignSettings = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100 }),
  agent_id: ObjectId,
  from_number: Type.Optional({ ...E164, description: 'the number calls come from: one of the account\'s' }),
  from_numbers: Type.Optional(Type.Array(E164, { minItems: 1, maxItems: 100, uniqueItems: true, description: 'a pool of the account\'s numbers, used in turn (instead of from_number)' })),
  start_at: Type.Optional(Type.Integer({ minimum: 0, maximum: 8_640_000_000_000_000, description: 'epoch ms of the first call; default: now' })),
  calling_hours: Type.Optional(CallingHours),
  timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'IANA zone of contacts whose number\'s zone is unknown and who have no `timezone` column; default UTC' })),
  max_concurrent_calls: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000, description: 'calls in progress at once (default 5); the account\'s CAMPAIGN_ACCOUNT_MAX_CONCURRENT applies too' })),
  max_calls_per_minute: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, description: 'new calls a minute (default 30); the account\'s CAMPAIGN_ACCOUNT_CALLS_PER_MINUTE applies too' })),
  retry_settings: Type.Optional(CampaignRetrySettings),
  ring_timeout_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 600, description: 'seconds a call rings before it counts as not answered' })),
  phone_column: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'CSV: the column of phone numbers (default "phone_number")' }))
})
export type CampaignSettingsInput = Static<typeof CampaignSettings>

const JsonContact = Type.Object({
  phone_number: Type.String({ maxLength: 64, description: 'E.164, or with spaces, dashes, dots or parentheses' }),
  timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'IANA zone; default: from the number' })),
  dynamic_context: Type.Optional(Type.Record(Type.String({ maxLength: 64 }), Type.String(), { description: 'the call\'s dynamic_context' }))
})

export const CampaignJsonBody = Type.Object({ ...CampaignSettings.properties, contacts: Type.Array(JsonContact, { minItems: 1 }) })

export const CampaignProgress = Type.Object({
  total: Type.Integer(),
  pending: Type.Integer({ description: 'not called yet, or waiting for a retry' }),
  calling: Type.Integer(),
  done: Type.Integer(),
  cancelled: Type.Integer({ description: 'left uncalled when the campaign was cancelled' }),
  outcomes: Type.Record(Type.String(), Type.Integer(), { description: 'done contacts per outcome: success, no_answer, busy, voicemail, failed, do_not_call' })
}, { [COMPONENT]: 'CampaignProgress' })

export const Campaign = Type.Object({
  _id: ObjectId,
  name: Type.String(),
  agent_id: Type.String(),
  status: Type.Union([Type.Literal('active'), Type.Literal('paused'), Type.Literal('cancelled'), Type.Literal('completed')]),
  status_reason: Nullable(Type.String(), 'why the dialler paused it: agent_deleted, agent_inactive, no_numbers, no_credits'),
  from_numbers: Type.Array(Type.String()),
  start_at: EpochMs,
  calling_hours: CallingHours,
  timezones: Type.Array(Type.String(), { description: 'the zones of its contacts' }),
  max_concurrent_calls: Type.Integer(),
  max_calls_per_minute: Type.Integer(),
  retry_settings: Nullable(CampaignRetrySettings, 'null: the agent\'s callback_settings'),
  ring_timeout_seconds: Nullable(Type.Integer()),
  columns: Type.Array(Type.String(), { description: 'the contacts\' columns besides the phone number' }),
  progress: CampaignProgress,
  created_at: EpochMs,
  updated_at: EpochMs,
  completed_at: Nullable(EpochMs)
}, { [COMPONENT]: 'Campaign' })

const Issue = Type.Object({ row: Type.Integer(), phone_number: Type.String(), reason: Type.String({ description: 'invalid_phone_number, invalid_timezone, value_too_long, wrong_column_count' }) })

export const CampaignImportReport = Type.Object({
  rows: Type.Integer({ description: 'rows of the list' }),
  imported: Type.Integer(),
  invalid_count: Type.Integer(),
  duplicate_count: Type.Integer(),
  do_not_call_count: Type.Integer(),
  invalid: Type.Array(Issue, { description: 'the first 1000' }),
  duplicates: Type.Array(Type.Object({ row: Type.Integer(), phone_number: Type.String(), first_row: Type.Integer() }), { description: 'the first 1000' }),
  do_not_call: Type.Array(Type.Object({ row: Type.Integer(), phone_number: Type.String() }), { description: 'the first 1000: numbers on the account\'s do-not-call list' })
}, { [COMPONENT]: 'CampaignImportReport' })

export const CampaignCreated = Type.Object({ campaign: Campaign, report: CampaignImportReport }, { [COMPONENT]: 'CampaignCreated' })
