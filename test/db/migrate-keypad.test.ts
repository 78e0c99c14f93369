import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// 0040_send_dtmf.sql: an upgrade gives the constraints a fresh database has; a send_dtmf tool row is taken, a type
// that is none still refused.

t.test('an upgrade from before send_dtmf gives the fresh constraints; send_dtmf tools are taken, unknown types refused', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const constraints = async (): Promise<unknown> => (await pool.query(`SELECT json_agg(conname || ' ' || pg_get_constraintdef(oid) ORDER BY conname) AS c
    FROM pg_constraint WHERE conrelid = 'agent_tools'::regclass`)).rows[0].c
  const fresh = await constraints()
  await migratedBefore(t, pool, '0040')
  t.ok((await migrate(pool)).includes('0040_send_dtmf.sql'))
  t.same(await constraints(), fresh, 'the same constraints as a fresh database')

  const userId = '65000000eeeeeeeeeeeeeeee'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'keypad@example.com'])
  // No such agent: a row past the CHECK fails on the foreign key (checked after it), one refused by it fails there.
  const agentId = '65000001eeeeeeeeeeeeeeee'
  const insert = async (id: string, type: string) => await pool.query('INSERT INTO agent_tools (id, user_id, agent_id, tool_type, settings) VALUES ($1, $2, $3, $4, $5)',
    [id, userId, agentId, type, { name: 'Press keys' }])
  await t.rejects(insert('65000002eeeeeeeeeeeeeeee', 'send_dtmf'), { code: '23503' }, 'send_dtmf passes the CHECK')
  await t.rejects(insert('65000004eeeeeeeeeeeeeeee', 'do_not_call'), { code: '23503' }, 'do_not_call too')
  await t.rejects(insert('65000003eeeeeeeeeeeeeeee', 'press_everything'), { code: '23514' })
})
