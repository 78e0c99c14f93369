import { sql } from 'kysely'
import type { DB } from '../../db/database.ts'

export interface VoiceFilter { provider?: string[], gender?: string[], language?: string, limit?: number, skip?: number }

export async function listVoices (db: DB, filter: VoiceFilter) {
  const language = filter.language?.toLowerCase()
  return await db.selectFrom('voices').selectAll()
    .$if(filter.provider !== undefined, (q) => q.where('provider', 'in', filter.provider!))
    .$if(filter.gender !== undefined, (q) => q.where('gender', 'in', filter.gender! as Array<'female' | 'male' | 'neutral'>))
    // `de` matches every German voice (de-DE, de-AT, de-CH); `de-AT` only the Austrian ones.
    .$if(language !== undefined, (q) => q.where(sql<boolean>`exists (select 1 from unnest(languages) l where lower(l) = ${language} or lower(l) like ${language + '-%'})`))
    .orderBy('provider').orderBy('name').orderBy('id')
    .limit(filter.limit ?? 100).offset(filter.skip ?? 0)
    .execute()
}

export async function voiceExists (db: DB, id: string): Promise<boolean> {
  return await db.selectFrom('voices').select('id').where('id', '=', id.toLowerCase()).executeTakeFirst() !== undefined
}

/** What the speech provider calls a catalogue voice (`alloy`), or undefined for an unknown id. */
export async function providerVoiceId (db: DB, id: string): Promise<string | undefined> {
  return (await db.selectFrom('voices').select('provider_voice_id').where('id', '=', id).executeTakeFirst())?.provider_voice_id
}

/** A catalogue voice by id (either case), or undefined. */
export async function findVoice (db: DB, id: string) {
  return await db.selectFrom('voices').selectAll().where('id', '=', id.toLowerCase()).executeTakeFirst()
}
