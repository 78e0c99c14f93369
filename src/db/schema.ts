import type { ColumnType, Generated, Selectable } from 'kysely'
import type { Static } from 'typebox'
import type {
  AnyObject, CallbackSettings, CallLatency, CallSettings, Conversation, DeliveryAttempt, RetrievalField, TemplateAgent, TemplateLlm, TokenUsage,
  TranscriptItem, TurnDetection, VoicemailSettings, WidgetSettings, WorkflowState
} from './shapes.ts'

// The jsonb columns are typed from the TypeBox shapes in shapes.ts (one source for the column, the
// responses that show it and the code that reads it); their types are re-exported for the modules.
export type { DeliveryAttempt, RetrievalField, TranscriptItem, TurnDetection, WorkflowState } from './shapes.ts'

/** A timestamptz the database fills in on insert. */
type CreatedAt = ColumnType<Date, Date | undefined, never>

/** A timestamptz filled in on insert and set by updates. */
type UpdatedAt = ColumnType<Date, Date | undefined, Date>

/** bigint columns come back as numbers (see database.ts); inserts and updates pass numbers too. */
type Int8 = ColumnType<number, number | undefined, number>

/** A jsonb column: read as parsed JSON, written as JSON text (pg would turn a JS array into a PostgreSQL array). */
type Json<T> = ColumnType<T, string, string>
/** The same, for a column with a default or NULL. */
type JsonOptional<T> = ColumnType<T, string | undefined, string>
/** The same, for a nullable column. */
type JsonNullable<T> = ColumnType<T | null, string | null | undefined, string | null>

export interface UsersTable {
  id: string
  email: string
  name: Generated<string>
  language: Generated<string>
  /** scrypt, self-describing (console/passwords.ts); null: no password set. */
  password_hash: Generated<string | null>
  created_at: CreatedAt
}

export interface ConsoleSessionsTable {
  id_hash: string
  user_id: string
  csrf_token: string
  via_link: Generated<boolean>
  created_at: CreatedAt
  last_seen_at: UpdatedAt
  expires_at: Date
  workspace_id: Generated<string | null>
}

/** A refused console form, kept for its session (console/drafts.ts). */
export interface ConsoleDraftsTable {
  id: string
  session_hash: string
  path: string
  form_values: Json<Record<string, string>>
  problems: Json<Record<string, string>>
  created_at: CreatedAt
}

export interface LoginLinksTable {
  token_hash: string
  user_id: string
  created_at: CreatedAt
  expires_at: Date
  used_at: Date | null
}

export interface SignInFailuresTable {
  id: Generated<number>
  bucket: string
  failed_at: CreatedAt
}

export interface ApiKeysTable {
  id: string
  user_id: string
  key_hash: string
  prefix: string
  name: Generated<string>
  created_at: CreatedAt
  last_used_at: Date | null
  revoked_at: Date | null
}

export interface VoicesTable {
  id: string
  name: string
  provider: string
  provider_voice_id: string
  gender: 'female' | 'male' | 'neutral'
  accent: string
  languages: string[]
  preview_url: string | null
}

export interface CustomersTable {
  id: string
  user_id: string
  name: string
  email: string | null
  phone_number: string | null
  metadata: JsonOptional<AnyObject>
  created_at: CreatedAt
  updated_at: UpdatedAt
}

export interface WorkspacesTable {
  id: string
  user_id: string
  name: string
  description: Generated<string>
  created_at: CreatedAt
  updated_at: UpdatedAt
}

export type WorkspaceRole = 'owner' | 'admin' | 'member'

export interface WorkspaceMembersTable {
  workspace_id: string
  email: string
  role: WorkspaceRole
  status: 'invited' | 'active'
  member_user_id: string | null
  invited_at: CreatedAt
  joined_at: Date | null
  invite_token_hash: Generated<string | null>
  invite_expires_at: Generated<Date | null>
}

export interface SubscriptionsTable {
  user_id: string
  plan: Generated<'free' | 'pro' | 'enterprise'>
  status: Generated<'active' | 'past_due' | 'canceled'>
  auto_top_up_enabled: Generated<boolean>
  auto_top_up_threshold: Int8
  top_up_amount: Int8
  period_anchor: CreatedAt
  created_at: CreatedAt
  updated_at: UpdatedAt
}

export type CreditKind = 'grant' | 'call_charge' | 'top_up' | 'adjustment'

export interface CreditLedgerTable {
  id: string
  user_id: string
  kind: CreditKind
  amount: number
  call_id: string | null
  description: Generated<string>
  created_at: CreatedAt
}

export type CarrierName = 'sandbox' | 'twilio' | 'telnyx'

export interface PhoneNumbersTable {
  id: string
  user_id: string
  phone_number: string
  source: 'purchased' | 'imported' | 'sip'
  carrier: CarrierName | 'sip'
  carrier_number_id: string | null
  carrier_account_id: string | null
  carrier_auth_token: string | null
  nickname: Generated<string>
  inbound_agent_id: string | null
  outbound_agent_id: string | null
  /** The agent version the number runs (null: the latest). */
  inbound_agent_version: number | null
  outbound_agent_version: number | null
  customer_id: string | null
  workspace_id: string | null
  sip_termination_uri: string | null
  sip_username: string | null
  sip_password: string | null
  /** The Twilio SIP Domain taking the PBX's calls to a SIP number, and its credential list (migrations/0039). */
  sip_domain_sid: string | null
  sip_credential_list_sid: string | null
  /**
   * Which carrier holds a connected SIP number's resources (migrations/0043): for `telnyx`, sip_domain_sid is its Call
   * Control application, sip_credential_list_sid its credential connection, and sip_subdomain the application's SIP
   * subdomain (the label before .sip.telnyx.com) that the PBX calls.
   */
  sip_carrier: 'twilio' | 'telnyx' | null
  sip_subdomain: string | null
  /**
   * A number of a tenant's own Telnyx account (migrations/0044): the account's webhook signing key (base64) and the
   * Call Control application carrying its calls; carrier_account_id is then our id for that account, and
   * carrier_auth_token its API key.
   */
  carrier_public_key: string | null
  carrier_connection_id: string | null
  created_at: CreatedAt
  updated_at: UpdatedAt
}

export interface EmailsTable {
  id: string
  user_id: string
  kind: string
  to_address: string
  subject: string
  body_text: string
  status: 'sent' | 'recorded' | 'failed'
  error: string | null
  message_id: string | null
  created_at: CreatedAt
}

export type MessageChannel = 'email' | 'sms' | 'chat'
export type MessageOrigin = 'live' | 'after_call' | 'test'
/** `sending`: counted within the limits and on its way; the others say what became of it (messaging/send.ts). */
export type MessageRowStatus = 'sending' | 'sent' | 'recorded' | 'failed' | 'refused'

export interface MessagesTable {
  id: string
  user_id: string
  call_id: string | null
  action_id: string | null
  origin: MessageOrigin
  channel: MessageChannel
  sender: string | null
  recipient: string
  subject: string | null
  body: string
  status: MessageRowStatus
  error: string | null
  carrier_message_id: string | null
  created_at: CreatedAt
  updated_at: UpdatedAt
}

export interface MessagingSettingsTable {
  user_id: string
  whatsapp_sender: string | null
  email_from_name: string | null
  email_reply_to: string | null
  updated_at: UpdatedAt
}

export interface CallRecordingsTable {
  call_id: string
  user_id: string
  duration_ms: number
  /** Bytes of samples stored so far, in call_recording_chunks. */
  pcm_bytes: ColumnType<string, string | number, string | number>
  /** 1: mono, both sides mixed (recordings from before issue 27); 2: interleaved stereo, caller left, agent right. */
  channels: ColumnType<number, number | undefined, number>
  created_at: CreatedAt
}

/** A stretch of a recording's samples (mono PCM16, 16 kHz, no header), stored while the call runs. */
export interface CallRecordingChunksTable {
  call_id: string
  user_id: string
  /** Where its first byte lies in the recording's samples. */
  offset_bytes: ColumnType<string, string | number, string | number>
  data: Buffer
}

export interface LlmConfigsTable {
  id: string
  user_id: string
  model: string
  begin_message: string | null
  general_prompt: string
  temperature: number
  max_tokens: number | null
  /** NULL: the installation's VOICE_ENGINE. */
  engine: 'realtime' | 'cascade' | 'simulator' | null
  /** Default `{ "type": "switchboard" }`: our own turn detection. */
  turn_detection: JsonOptional<TurnDetection>
  created_at: CreatedAt
  updated_at: UpdatedAt
}

export interface AgentsTable {
  id: string
  user_id: string
  customer_id: string | null
  workspace_id: string | null
  agent_name: string
  llm_id: string
  voice_id: string
  interruption_sensitivity: number
  call_settings: Json<Partial<Static<typeof CallSettings>>>
  data_retrieval: Json<RetrievalField[]>
  webhook_url: string | null
  is_data_collection_active: boolean
  status: Generated<'active' | 'inactive'>
  folder: string | null
  is_customer_memory_active: Generated<boolean>
  widget_settings: Json<Partial<Static<typeof WidgetSettings>>>
  callback_settings: Json<Partial<Static<typeof CallbackSettings>>>
  voicemail_settings: JsonOptional<Partial<Static<typeof VoicemailSettings>>>
  /** The agent's workflow (agents/workflow.ts, read through its schema); null: it talks from one prompt. */
  workflow: JsonNullable<AnyObject>
  /** Its latest version (agent_versions); 0: none written yet. */
  version: Generated<number>
  created_at: CreatedAt
  updated_at: UpdatedAt
}

export interface AgentVersionsTable {
  agent_id: string
  user_id: string
  version: number
  /** What the agent's calls run on (agents/versions.ts, AgentSnapshot). */
  snapshot: Json<AnyObject>
  /** What made it: created, agent, llm, tools, actions, workflow, restore. */
  change: string
  restored_from: number | null
  created_at: CreatedAt
}

/** Shape shared by agent_actions and agent_tools: a typed settings object hanging off an agent. */
export interface AgentCapabilityTable {
  id: string
  user_id: string
  agent_id: string
  settings: Json<Record<string, unknown>>
  is_active: boolean
  created_at: CreatedAt
  updated_at: UpdatedAt
}

export interface AgentActionsTable extends AgentCapabilityTable { action_type: string }
export interface AgentToolsTable extends AgentCapabilityTable { tool_type: string }

/** An agent's public widget key (docs/widget.md): stored as it is, since it is public and shown again. */
export interface WidgetKeysTable {
  agent_id: string
  user_id: string
  key: string
  /** When this key was made: a rotation sets it again. */
  created_at: UpdatedAt
}

/** Widget-key calls of one client address to one agent in the window that ends at `window_ends_at`. */
export interface HourlyBudgetsTable {
  key: string
  used: number
  window_ends_at: Date
}

export interface IntegrationsTable {
  user_id: string
  provider: string
  account_label: string
  credentials: Json<Record<string, string>>
  connected_at: UpdatedAt
  method: ColumnType<'api_key' | 'oauth', 'api_key' | 'oauth' | undefined, 'api_key' | 'oauth'>
  status: ColumnType<'connected' | 'revoked', 'connected' | 'revoked' | undefined, 'connected' | 'revoked'>
  status_reason: ColumnType<string | null, string | null | undefined, string | null>
  expires_at: ColumnType<Date | null, Date | null | undefined, Date | null>
  refreshed_at: ColumnType<Date | null, Date | null | undefined, Date | null>
}

/** A pending OAuth authorization (migration 0030): used once, by the session that asked for it. */
export interface OauthStatesTable {
  state_hash: string
  user_id: string
  session_id: string | null
  provider: string
  code_verifier: string
  created_at: CreatedAt
  expires_at: Date
}

export interface AgentTemplatesTable {
  id: string
  position: number
  icon_url: string
  description: string
  agent: Json<Static<typeof TemplateAgent>>
  llm: Json<Static<typeof TemplateLlm>>
}

export interface CallsTable {
  id: string
  user_id: string
  agent_id: string
  agent_name: string
  customer_id: string | null
  workspace_id: string | null
  call_type: 'phone' | 'web'
  direction: 'inbound' | 'outbound'
  call_status: 'started' | 'pending' | 'success' | 'failed'
  call_from: string | null
  call_to: string | null
  start_timestamp: Date
  end_timestamp: Date | null
  duration_ms: number | null
  recording_url: string | null
  disconnection_reason: string | null
  sentiment: 'positive' | 'negative' | 'neutral' | null
  sentiment_explanation: string | null
  call_summary: string | null
  task_achieved: boolean | null
  transcription: JsonOptional<TranscriptItem[]>
  phone_call_credits: Generated<number>
  web_call_credits: Generated<number>
  text_message_credits: Generated<number>
  call_forwarding_credits: Generated<number>
  token_usage: JsonOptional<TokenUsage>
  input_tokens: Generated<number>
  output_tokens: Generated<number>
  sms_count: Generated<number>
  forwarding_seconds: Generated<number>
  custom_data: JsonOptional<AnyObject>
  dynamic_context: JsonOptional<AnyObject>
  custom_analysis_data: JsonNullable<AnyObject>
  collected_data: JsonNullable<AnyObject>
  transfer_history: JsonNullable<unknown[]>
  /** The agent version the call ran (null: a call from before versions). */
  agent_version: number | null
  /** A workflow's path and variables (null: the agent had none). */
  workflow: JsonNullable<WorkflowState>
  runtime: Generated<'voice' | 'simulator' | 'external'>
  access_token_hash: string | null
  access_token_expires_at: Date | null
  /** When the browser's stream opened with the access token (spending it). */
  joined_at: Date | null
  /** A phone call's one-time media-stream token (SHA-256), apart from a web call's access token. */
  stream_token_hash: string | null
  stream_token_expires_at: Date | null
  /** When the person answered a call the carrier placed; duration and minutes run from here. */
  answered_at: Date | null
  /** How long an outbound call rings before it counts as not answered; null: the default (telephony/calls.ts). */
  ring_timeout_seconds: number | null
  speech_recognised_seconds: Generated<number>
  speech_synthesised_seconds: Generated<number>
  carrier: 'twilio' | 'telnyx' | null
  /** The carrier's id of the call (Twilio's CallSid). */
  carrier_call_id: string | null
  /** What the carrier's answering-machine detection said (Twilio's AnsweredBy); null: no verdict (detection off, or none yet). */
  answered_by: string | null
  /** The conversation held while the call is forwarded to a phone number (shapes.ts, Conversation). */
  forwarding: JsonNullable<Conversation>
  /** When the person a Telnyx call was forwarded to answered (the transfer's leg); forwarding minutes run from here. */
  transfer_answered_at: Date | null
  /** The call's timed turns and their summary (shapes.ts, CallLatency); null: no turn was timed. */
  latency: JsonNullable<CallLatency>
  /** The person on the other end (contacts), set when the call is created; null: none known, or the contact was deleted. */
  contact_id: Generated<string | null>
  /** The campaign that placed the call (migrations/0034_campaigns.sql): the campaign, not callback_settings, retries it. */
  campaign_id: Generated<string | null>
  outcome: 'completed' | 'failed' | null
  analysis_status: 'pending' | 'completed' | 'failed' | null
  analysis_error: string | null
  /** The list view as JSON text, set by a trigger (migrations/0010_call_list_json.sql). */
  list_json: Generated<string>
  created_at: CreatedAt
  updated_at: UpdatedAt
}

/** A weekday's calling windows, local times "HH:MM" (end may be "24:00"). */
export type CallingHours = Partial<Record<'mon' | 'tue' | 'wed' | 'thu' | 'fri' | 'sat' | 'sun', Array<{ start: string, end: string }>>>

/** A campaign's own retries (docs/campaigns.md); the same members as an agent's callback_settings. */
export interface RetrySettings { max_attempts: number, retry_delay_minutes: number, on_outcomes: Array<'no_answer' | 'busy' | 'voicemail' | 'failed'> }

/** An outbound campaign (migrations/0034_campaigns.sql). */
export interface CampaignsTable {
  id: string
  user_id: string
  agent_id: string
  name: string
  status: Generated<'active' | 'paused' | 'cancelled' | 'completed'>
  status_reason: string | null
  from_numbers: string[]
  start_at: Date
  calling_hours: Json<CallingHours>
  timezones: string[]
  max_concurrent_calls: number
  max_calls_per_minute: number
  retry_settings: JsonNullable<RetrySettings>
  ring_timeout_seconds: number | null
  columns: Generated<string[]>
  tick_token: string | null
  completed_at: Date | null
  created_at: CreatedAt
  updated_at: UpdatedAt
}

/** One contact of a campaign: a row of its upload. */
export interface CampaignContactsTable {
  id: string
  campaign_id: string
  user_id: string
  row_number: number
  phone_number: string
  timezone: string
  columns: JsonOptional<Record<string, string>>
  status: Generated<'pending' | 'calling' | 'done' | 'cancelled'>
  outcome: string | null
  attempts: Generated<number>
  due_at: Date
  last_call_id: string | null
  updated_at: UpdatedAt
}

/** A call a campaign placed. */
export interface CampaignDialsTable {
  campaign_id: string
  user_id: string
  contact_id: string
  call_id: string
  attempt: number
  dialled_at: Date
}

/**
 * A callback of an outbound phone call: scheduled when a call ends unanswered, then placed, cancelled or failed. Its
 * call (`call_id`) is the call whose `callback_of` and `callback_attempt` the API shows.
 */
export interface CallCallbacksTable {
  id: string
  user_id: string
  /** The first call of the chain. */
  callback_of: string
  /** The call whose end scheduled it (the first call, or the callback before). */
  after_call_id: string
  attempt: number
  /** The agent's max_attempts when it was scheduled. */
  max_attempts: number
  to_number: string
  status: Generated<'scheduled' | 'placed' | 'cancelled' | 'failed'>
  reason: string | null
  due_at: Date
  /** The call placed. */
  call_id: string | null
  created_at: CreatedAt
  updated_at: UpdatedAt
}

/**
 * A call as stored. Lower than the calls module so that the modules which take a call as data (deliveries,
 * runtime, telephony, voice) need nothing of calls for its shape; it lives beside its table rather than in
 * shapes.ts, which this file imports (a type there would make the two files import each other).
 */
export type CallRow = Selectable<CallsTable>

/** A person an account's agents talk to: one phone number or e-mail address per owner (migrations/0024_contacts.sql). */
export interface ContactsTable {
  id: string
  user_id: string
  customer_id: string | null
  workspace_id: string | null
  phone_number: string | null
  email: string | null
  name: string | null
  created_at: CreatedAt
  updated_at: UpdatedAt
  last_call_at: Date
}

/** Where a do-not-call entry came from: the API, the console, a caller who asked (the do_not_call tool), a campaign. */
export type DoNotCallSource = 'api' | 'console' | 'call' | 'campaign'

/** A number the account's agents must not call (migrations/0035_do_not_call.sql). */
export interface DoNotCallTable {
  user_id: string
  phone_number: string
  source: DoNotCallSource
  call_id: string | null
  note: string | null
  created_at: CreatedAt
}

/** How many numbers an account's do-not-call list holds (its limit's count). */
export interface DoNotCallCountsTable {
  user_id: string
  size: number
}

/** What the built-in appointment_booking tool booked (migrations/0031_appointments.sql). */
/** An agent's test scenario (docs/testing.md); the jsonb members as agent-tests/shapes.ts describes them. */
export interface AgentTestsTable {
  id: string
  user_id: string
  agent_id: string
  name: string
  caller: Json<AnyObject>
  mocks: Json<Array<{ tool: string, output: string }>>
  expectations: Json<AnyObject[]>
  dynamic_context: Json<AnyObject>
  created_at: CreatedAt
  updated_at: UpdatedAt
}

export interface AgentTestRunsTable {
  id: string
  user_id: string
  agent_id: string
  agent_version: number
  engine: 'text' | 'simulator'
  status: Generated<'running' | 'passed' | 'failed'>
  passed: Generated<number>
  failed: Generated<number>
  started_at: CreatedAt
  /** null while it runs. */
  duration_ms: number | null
}

export interface AgentTestResultsTable {
  run_id: string
  position: number
  scenario_id: string
  scenario_name: string
  status: 'passed' | 'failed' | 'error'
  expectations: Json<AnyObject[]>
  transcript: Json<TranscriptItem[]>
  end_reason: string | null
  caller_turns: number
  answer_ms: Json<number[]>
  duration_ms: number
  error: string | null
}

export interface AppointmentsTable {
  id: string
  user_id: string
  workspace_id: string | null
  agent_id: string
  tool_id: string
  call_id: string | null
  contact_id: string | null
  starts_at: Date
  ends_at: Date
  /** The end plus the tool's buffer: no other appointment of the tool starts before it. */
  blocked_until: Date
  time_zone: string
  name: string
  email: string | null
  phone: string | null
  notes: string | null
  status: Generated<'booked' | 'cancelled'>
  /** iCalendar's SEQUENCE: one more at every move and at the cancellation. */
  sequence: Generated<number>
  cancel_reason: string | null
  created_at: CreatedAt
  updated_at: UpdatedAt
  cancelled_at: Date | null
}

export interface CallDailyStatsTable {
  user_id: string
  day: Date
  agent_id: string
  customer_id: string
  workspace_id: string
  direction: string
  call_type: string
  call_status: string
  sentiment: string
  calls: number
  ended_calls: number
  duration_ms: number
}

export interface CallDailyAgentStatsTable {
  user_id: string
  day: Date
  agent_id: string
  customer_id: string
  workspace_id: string
  calls: number
  ended_calls: number
  duration_ms: number
  phone_call_credits: number
  web_call_credits: number
  text_message_credits: number
  call_forwarding_credits: number
  input_tokens: number
  output_tokens: number
}

/** What callers waited per day, agent, workspace and wait (migrations/0048_call_daily_waits.sql). */
export interface CallDailyWaitsTable {
  user_id: string
  day: Date
  agent_id: string
  workspace_id: string
  /** turn: answered turns of this wait; median: calls whose median wait it is. */
  kind: 'turn' | 'median'
  wait_ms: number
  n: number
  interrupted: number
}

export interface WebhookDeliveriesTable {
  id: string
  user_id: string
  delivery_id: string
  correlation_id: string
  call_id: string
  agent_id: string
  action_id: string | null
  /** agent_webhook, or the type of the action behind it (api_call, send_email, send_sms, send_chat). */
  kind: string
  name: string
  status: 'pending' | 'delivered' | 'failed'
  method: string
  url: string | null
  body: JsonNullable<unknown>
  variables: JsonNullable<AnyObject>
  schedule: number[]
  attempts_max: number
  scheduled_made: Generated<number>
  attempts_made: Generated<number>
  attempts: JsonOptional<DeliveryAttempt[]>
  next_attempt_at: Date | null
  delivered_at: Date | null
  purged_at: Date | null
  created_at: CreatedAt
  updated_at: UpdatedAt
}

export interface WebhookSecretsTable {
  id: string
  user_id: string
  secret: string
  created_at: CreatedAt
  expires_at: Date | null
}

export interface WebhookTestSecretsTable {
  user_id: string
  secret: string
  created_at: CreatedAt
}

export interface DeliveryNotificationsTable {
  id: string
  user_id: string
  source_key: string
  delivery_row_id: string
  final: boolean
  email_id: string
  sent_at: CreatedAt
}

export interface IdempotencyKeysTable {
  user_id: string
  key: string
  request_hash: string
  call_id: string
  response: Json<Record<string, unknown>>
  created_at: CreatedAt
}

/** Every table the application queries. The migrations are the truth; this mirrors them. */
export type KnowledgeFileType = 'pdf' | 'docx' | 'txt' | 'markdown' | 'csv' | 'html'
export type KnowledgeFileStatus = 'pending' | 'processing' | 'ready' | 'failed'

export interface KnowledgeBasesTable {
  id: string
  user_id: string
  customer_id: string | null
  workspace_id: string | null
  name: string
  description: string
  folder: Generated<string>
  language: string
  search_config: string
  created_at: CreatedAt
  updated_at: UpdatedAt
}

export interface KnowledgeBaseFilesTable {
  id: string
  user_id: string
  knowledge_base_id: string
  file_name: string
  file_type: KnowledgeFileType
  file_size: Int8
  status: ColumnType<KnowledgeFileStatus, KnowledgeFileStatus | undefined, KnowledgeFileStatus>
  error: string | null
  passage_count: Generated<number>
  uploaded_at: CreatedAt
  processed_at: Date | null
}

export interface KnowledgeBaseFilePartsTable {
  file_id: string
  user_id: string
  n: number
  data: Buffer
}

export interface KnowledgeBasePassagesTable {
  file_id: string
  user_id: string
  knowledge_base_id: string
  position: number
  page: number | null
  char_start: number
  char_end: number
  content: string
  tsv: string
}

export interface KnowledgeBaseAgentsTable {
  knowledge_base_id: string
  agent_id: string
  user_id: string
  assigned_at: CreatedAt
}

export interface Database {
  users: UsersTable
  api_keys: ApiKeysTable
  console_sessions: ConsoleSessionsTable
  console_drafts: ConsoleDraftsTable
  login_links: LoginLinksTable
  sign_in_failures: SignInFailuresTable
  voices: VoicesTable
  customers: CustomersTable
  workspaces: WorkspacesTable
  workspace_members: WorkspaceMembersTable
  subscriptions: SubscriptionsTable
  credit_ledger: CreditLedgerTable
  phone_numbers: PhoneNumbersTable
  emails: EmailsTable
  messages: MessagesTable
  messaging_settings: MessagingSettingsTable
  llm_configs: LlmConfigsTable
  call_recordings: CallRecordingsTable
  call_recording_chunks: CallRecordingChunksTable
  agents: AgentsTable
  agent_versions: AgentVersionsTable
  agent_actions: AgentActionsTable
  agent_tools: AgentToolsTable
  widget_keys: WidgetKeysTable
  hourly_budgets: HourlyBudgetsTable
  integrations: IntegrationsTable
  oauth_states: OauthStatesTable
  agent_templates: AgentTemplatesTable
  calls: CallsTable
  call_callbacks: CallCallbacksTable
  campaigns: CampaignsTable
  campaign_contacts: CampaignContactsTable
  campaign_dials: CampaignDialsTable
  contacts: ContactsTable
  do_not_call: DoNotCallTable
  do_not_call_counts: DoNotCallCountsTable
  appointments: AppointmentsTable
  agent_tests: AgentTestsTable
  agent_test_runs: AgentTestRunsTable
  agent_test_results: AgentTestResultsTable
  call_daily_stats: CallDailyStatsTable
  call_daily_agent_stats: CallDailyAgentStatsTable
  call_daily_waits: CallDailyWaitsTable
  idempotency_keys: IdempotencyKeysTable
  webhook_deliveries: WebhookDeliveriesTable
  webhook_secrets: WebhookSecretsTable
  webhook_test_secrets: WebhookTestSecretsTable
  delivery_notifications: DeliveryNotificationsTable
  knowledge_bases: KnowledgeBasesTable
  knowledge_base_files: KnowledgeBaseFilesTable
  knowledge_base_file_parts: KnowledgeBaseFilePartsTable
  knowledge_base_passages: KnowledgeBasePassagesTable
  knowledge_base_agents: KnowledgeBaseAgentsTable
}
