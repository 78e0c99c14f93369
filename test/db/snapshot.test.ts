import t from 'tap'
import { inOneSnapshot } from '../../src/db/database.ts'
import { createAccount, setup } from '../helpers/app.ts'

// A page of rows and its total are read in one snapshot (the API's and console's paged lists: do-not-call, contacts,
// deliveries, appointments, test runs): rows listed between the two reads change neither.

t.test('reads inside inOneSnapshot do not see what was committed after the first of them', async (t) => {
  const { db } = await setup(t)
  const { user } = await createAccount(db)
  const listed = async (phone: string) => await db.insertInto('do_not_call').values({ user_id: user.id, phone_number: phone, source: 'api', call_id: null, note: null }).execute()
  await listed('+14155550100')
  const seen = await inOneSnapshot(db, async (snapshot) => {
    const before = await snapshot.selectFrom('do_not_call').select('phone_number').where('user_id', '=', user.id).execute()
    // Committed on another connection of the pool while the snapshot is open.
    await listed('+14155550101')
    const after = await snapshot.selectFrom('do_not_call').select('phone_number').where('user_id', '=', user.id).execute()
    return { before: before.length, after: after.length }
  })
  t.same(seen, { before: 1, after: 1 })
  const now = await db.selectFrom('do_not_call').select('phone_number').where('user_id', '=', user.id).execute()
  t.equal(now.length, 2, 'the other connection\'s row is there once the snapshot ends')
  await t.rejects(inOneSnapshot(db, async (snapshot) => await snapshot.deleteFrom('do_not_call').execute()), { code: '25006' }, 'the snapshot is read only')
})
