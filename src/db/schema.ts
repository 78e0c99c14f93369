import type { ColumnType, Generated } from 'kysely'

/** A timestamptz the database fills in on insert. */
type CreatedAt = ColumnType<Date, Date | undefined, never>
/** A timestamptz with a default that updates set explicitly. */
type UpdatedAt = ColumnType<Date, Date | undefined, Date>
/** bigint columns come back as numbers (see database.ts); inserts and updates pass numbers too. */
type Int8 = ColumnType<number, number | undefined, number>

export interface UsersTable {
  id: string
  email: string
  name: Generated<string>
  language: Generated<string>
  created_at: CreatedAt
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
  metadata: ColumnType<Record<string, unknown>, string | undefined, string>
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

export type CarrierName = 'sandbox' | 'twilio'

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
  customer_id: string | null
  workspace_id: string | null
  sip_termination_uri: string | null
  sip_username: string | null
  sip_password: string | null
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

/** Every table the application queries. The migrations are the truth; this mirrors them. */
export interface Database {
  users: UsersTable
  api_keys: ApiKeysTable
  voices: VoicesTable
  customers: CustomersTable
  workspaces: WorkspacesTable
  workspace_members: WorkspaceMembersTable
  subscriptions: SubscriptionsTable
  credit_ledger: CreditLedgerTable
  phone_numbers: PhoneNumbersTable
  emails: EmailsTable
}
