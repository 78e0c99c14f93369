import type { ColumnType, Generated } from 'kysely'

/** A timestamptz the database fills in on insert. */
type CreatedAt = ColumnType<Date, Date | undefined, never>

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

/** Every table the application queries. The migrations are the truth; this mirrors them. */
export interface Database {
  users: UsersTable
  api_keys: ApiKeysTable
  voices: VoicesTable
}
