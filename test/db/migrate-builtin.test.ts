import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// 0031_appointments.sql: an upgrade gives the schema a fresh database has, and the exclusion constraint refuses a
// booked appointment that overlaps another of its tool (buffer included), not a cancelled one, not another tool's.

t.test('an upgrade from before appointments gives the fresh schema; overlapping booked appointments of one tool are refused', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(column_name || ' ' || data_type || ' ' || is_nullable ORDER BY column_name) FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name = 'appointments') AS columns,
    (SELECT json_agg(pg_get_indexdef(indexrelid) ORDER BY indexrelid::regclass::text) FROM pg_index WHERE indrelid = 'appointments'::regclass) AS indexes,
    (SELECT json_agg(conname || ' ' || pg_get_constraintdef(oid) ORDER BY conname) FROM pg_constraint WHERE conrelid = 'appointments'::regclass) AS constraints`)).rows[0]
  const fresh = await schema()
  await migratedBefore(t, pool, '0031')
  t.ok((await migrate(pool)).includes('0031_appointments.sql'))
  t.same(await schema(), fresh, 'the same columns, indexes and constraints as a fresh database')

  const userId = '65000000dddddddddddddddd'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'appointments@example.com'])
  let n = 0
  const insert = async (toolId: string, start: string, end: string, blockedUntil: string, status = 'booked') => await pool.query(`INSERT INTO appointments
    (id, user_id, agent_id, tool_id, starts_at, ends_at, blocked_until, time_zone, name, status, cancelled_at)
    VALUES ($1, $2, '65000001dddddddddddddddd', $3, $4, $5, $6, 'UTC', 'Ada', $7, CASE WHEN $7 = 'cancelled' THEN now() END)`,
  [`65000002dddddddddddd${String(++n).padStart(4, '0')}`, userId, toolId, start, end, blockedUntil, status])
  const tool = '65000003dddddddddddddddd'
  await insert(tool, '2030-01-01T09:00Z', '2030-01-01T09:30Z', '2030-01-01T09:40Z')
  await t.rejects(insert(tool, '2030-01-01T09:35Z', '2030-01-01T10:05Z', '2030-01-01T10:05Z'), { code: '23P01' }, 'inside the buffer')
  await t.resolves(insert(tool, '2030-01-01T09:40Z', '2030-01-01T10:10Z', '2030-01-01T10:10Z'), 'right after the buffer')
  await t.resolves(insert(tool, '2030-01-01T09:00Z', '2030-01-01T09:30Z', '2030-01-01T09:30Z', 'cancelled'), 'a cancelled one holds no time')
  await t.resolves(insert('65000004dddddddddddddddd', '2030-01-01T09:00Z', '2030-01-01T09:30Z', '2030-01-01T09:30Z'), 'another tool\'s calendar')
  await t.rejects(insert(tool, '2030-01-01T09:00Z', '2030-01-01T09:00Z', '2030-01-01T09:00Z', 'cancelled'), { code: '23514' }, 'an empty time is no appointment')
})
