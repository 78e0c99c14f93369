import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// migrations/0045_calls_search.sql on an install that holds calls already: the search indexes are built over them
// (valid, as on a fresh database), and the console's search conditions (calls/queries.ts, searchCondition) are
// answered from them.

t.test('an upgrade builds the calls\' search indexes over stored calls, and searches use them', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const indexes = async (): Promise<unknown> => (await pool.query(`SELECT json_agg(pg_get_indexdef(indexrelid) || ' ' || indisvalid::text ORDER BY indexrelid::regclass::text) AS indexes
    FROM pg_index WHERE indrelid = 'calls'::regclass`)).rows[0]
  const fresh = await indexes()
  await migratedBefore(t, pool, '0045')
  const userId = '65000000dddddddddddddddd'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'search@example.com'])
  const transcript = JSON.stringify([
    { speaker: 'user', content: 'I need a Refund, please', timestamp: 1 },
    { speaker: 'tool', content: 'lookup_order', timestamp: 2 },
    { speaker: 'agent', content: 'Of course.', timestamp: 3 }
  ])
  await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, call_from, call_to, start_timestamp, transcription)
    VALUES ('65000001dddddddddddddddd', $1, '65000003dddddddddddddddd', 'Front desk', 'phone', 'outbound', 'success', '+14155550100', '+14155550199', now(), $2),
      ('65000002dddddddddddddddd', $1, '65000003dddddddddddddddd', 'Front desk', 'web', 'outbound', 'success', NULL, NULL, now(), '[]')`, [userId, transcript])

  t.ok((await migrate(pool)).includes('0045_calls_search.sql'))
  t.same(await indexes(), fresh, 'the same indexes, all valid, as a fresh database')
  t.same((await pool.query('SELECT id, call_transcript_text(transcription) AS text FROM calls ORDER BY id')).rows, [
    { id: '65000001dddddddddddddddd', text: 'I need a Refund, please Of course.' },
    { id: '65000002dddddddddddddddd', text: null }
  ], 'the spoken lines only; an empty transcript, no text')

  // With sequential and plain index scans priced out, as with many calls and few matches: the conditions the console writes use the indexes.
  const client = await pool.connect()
  t.teardown(() => client.release())
  await client.query('SET enable_seqscan = off; SET enable_indexscan = off')
  const plan = async (condition: string, value: string) => JSON.stringify((await client.query(`EXPLAIN (FORMAT JSON) SELECT id FROM calls WHERE ${condition}`.replace('$2', '$1'), [value])).rows)
  const words = "to_tsvector('simple', call_transcript_text(transcription)) @@ websearch_to_tsquery('simple', $2)"
  const digits = "(coalesce(call_from, '') || ' ' || coalesce(call_to, '')) LIKE $2"
  t.match(await plan(words, 'refund'), 'calls_transcript_search_idx')
  t.match(await plan(digits, '%5550199%'), 'calls_numbers_search_idx')
  t.same((await client.query(`SELECT id FROM calls WHERE ${words}`.replace('$2', '$1'), ['REFUND please'])).rows, [{ id: '65000001dddddddddddddddd' }])
  t.same((await client.query(`SELECT id FROM calls WHERE ${words}`.replace('$2', '$1'), ['lookup_order'])).rows, [], 'a tool line is not speech')
  t.same((await client.query(`SELECT id FROM calls WHERE ${digits}`.replace('$2', '$1'), ['%5550199%'])).rows, [{ id: '65000001dddddddddddddddd' }])
})
