import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// migrations/0046_console_drafts.sql on an install with sessions: the drafts table comes, one draft per session and
// form, and a session's drafts go with it.

t.test('an upgrade adds console_drafts: one per session and path, deleted with the session', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  await migratedBefore(t, pool, '0046')
  const userId = '65000000eeeeeeeeeeeeeeee'
  const hash = 'a'.repeat(64)
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'drafts@example.com'])
  await pool.query("INSERT INTO console_sessions (id_hash, user_id, csrf_token, expires_at) VALUES ($1, $2, 'x', now() + interval '1 day')", [hash, userId])
  t.ok((await migrate(pool)).includes('0046_console_drafts.sql'))
  const insert = async (id: string) => await pool.query("INSERT INTO console_drafts (id, session_hash, path, form_values, problems) VALUES ($1, $2, '/agents/new', '{}', '{}')", [id, hash])
  await insert('65000001eeeeeeeeeeeeeeee')
  await t.rejects(insert('65000002eeeeeeeeeeeeeeee'), /console_drafts_session_path_idx/, 'one draft per session and form')
  await pool.query('DELETE FROM console_sessions WHERE id_hash = $1', [hash])
  t.equal((await pool.query('SELECT count(*)::int AS n FROM console_drafts')).rows[0].n, 0, 'the session\'s drafts went with it')
})
