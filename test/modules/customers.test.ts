import t from 'tap'
import { createAccount, setup } from '../helpers/app.ts'

t.test('customers: create, get, list, update, delete', async (t) => {
  const { app, db } = await setup(t)
  const { headers, user } = await createAccount(db)

  const created = await app.inject({
    method: 'POST',
    url: '/v1/customer',
    headers,
    payload: { customer_name: 'Acme Dental', email: 'office@acme.example', phone_number: '+14155550123', metadata: { crm_id: 42, tags: ['vip'] }, user_id: '65a0f0000000000000000001' }
  })
  t.equal(created.statusCode, 201)
  const customer = created.json()
  t.match(customer, { _id: /^[0-9a-f]{24}$/, customer_name: 'Acme Dental', email: 'office@acme.example', phone_number: '+14155550123', metadata: { crm_id: 42, tags: ['vip'] }, created_at: Number, updated_at: Number })
  t.same(Object.keys(customer).sort(), ['_id', 'created_at', 'customer_name', 'email', 'metadata', 'phone_number', 'updated_at'])
  const row = await db.selectFrom('customers').selectAll().where('id', '=', customer._id).executeTakeFirstOrThrow()
  t.equal(row.user_id, user.id, 'unknown body fields cannot move the record to another account')

  const minimal = await app.inject({ method: 'POST', url: '/v1/customer', headers, payload: { customer_name: 'Bob' } })
  t.equal(minimal.statusCode, 201)
  t.match(minimal.json(), { email: null, phone_number: null, metadata: {} })

  const got = await app.inject({ method: 'GET', url: `/v1/customer/${customer._id}`, headers })
  t.equal(got.statusCode, 200)
  t.same(got.json(), customer)

  const list = await app.inject({ method: 'GET', url: '/v1/customer/list', headers })
  t.same(list.json().map((c: { _id: string }) => c._id), [customer._id, minimal.json()._id])
  const page = await app.inject({ method: 'GET', url: '/v1/customer/list?limit=1&skip=1', headers })
  t.same(page.json().map((c: { _id: string }) => c._id), [minimal.json()._id])

  const updated = await app.inject({ method: 'PATCH', url: `/v1/customer/${customer._id}`, headers, payload: { customer_name: 'Acme Dental Group', email: null } })
  t.equal(updated.statusCode, 200)
  t.match(updated.json(), { customer_name: 'Acme Dental Group', email: null, phone_number: '+14155550123', metadata: { crm_id: 42 } })

  const deleted = await app.inject({ method: 'DELETE', url: `/v1/customer/${customer._id}`, headers })
  t.equal(deleted.statusCode, 204)
  t.equal(deleted.body, '')
  t.equal((await app.inject({ method: 'GET', url: `/v1/customer/${customer._id}`, headers })).statusCode, 404)
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/customer/${customer._id}`, headers })).statusCode, 404)
})

t.test('customers: bad input names the field', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  const cases: Array<[unknown, RegExp]> = [
    [{}, /^body\.customer_name is required$/],
    [{ customer_name: '' }, /^body\.customer_name must NOT have fewer than 1 characters/],
    [{ customer_name: 5 }, /^body\.customer_name must be string/],
    [{ customer_name: 'x', email: 'not-an-address' }, /^body\.email must be an e-mail address/],
    [{ customer_name: 'x', phone_number: '0151 1234567' }, /^body\.phone_number must be an E\.164 phone number/],
    [{ customer_name: 'x', metadata: [1, 2] }, /^body\.metadata must be object/]
  ]
  for (const [payload, message] of cases) {
    const res = await app.inject({ method: 'POST', url: '/v1/customer', headers, payload: payload as object })
    t.equal(res.statusCode, 400, JSON.stringify(payload))
    t.match(res.json(), { statusCode: 400, error: 'Bad Request', code: 'validation_error', message })
  }
  const badId = await app.inject({ method: 'GET', url: '/v1/customer/not-an-id', headers })
  t.match(badId.json(), { statusCode: 400, code: 'invalid_id', message: 'params.id must be a 24-character hexadecimal id' })
  for (const method of ['PATCH', 'DELETE'] as const) {
    const res = await app.inject({ method, url: '/v1/customer/123', headers, payload: {} })
    t.equal(res.statusCode, 400, method)
  }
  t.equal((await app.inject({ method: 'GET', url: '/v1/customer/list?limit=0', headers })).statusCode, 400)
  t.equal(await db.selectFrom('customers').select('id').execute().then((r) => r.length), 0, 'nothing stored')
})

t.test("customers: another account's customer is a 404 everywhere", async (t) => {
  const { app, db } = await setup(t)
  const alice = await createAccount(db)
  const bob = await createAccount(db)
  const customer = (await app.inject({ method: 'POST', url: '/v1/customer', headers: alice.headers, payload: { customer_name: 'Alice client' } })).json()
  for (const [method, payload] of [['GET', undefined], ['PATCH', { customer_name: 'stolen' }], ['DELETE', undefined]] as const) {
    const res = await app.inject({ method, url: `/v1/customer/${customer._id}`, headers: bob.headers, payload })
    t.equal(res.statusCode, 404, method)
    t.same(res.json(), { statusCode: 404, error: 'Not Found', message: 'customer not found', code: 'not_found' })
  }
  t.same((await app.inject({ method: 'GET', url: '/v1/customer/list', headers: bob.headers })).json(), [])
  const row = await db.selectFrom('customers').select('name').where('id', '=', customer._id).executeTakeFirstOrThrow()
  t.equal(row.name, 'Alice client')
})

t.test('customers: a customer that owns phone numbers cannot be deleted', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  const customer = (await app.inject({ method: 'POST', url: '/v1/customer', headers, payload: { customer_name: 'Owner of numbers' } })).json()
  for (const line of ['0100', '0101']) {
    const bought = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: `+1415555${line}`, customer_id: customer._id } })
    t.equal(bought.statusCode, 201)
  }
  const refused = await app.inject({ method: 'DELETE', url: `/v1/customer/${customer._id}`, headers })
  t.equal(refused.statusCode, 409)
  t.same(refused.json(), {
    statusCode: 409,
    error: 'Conflict',
    code: 'customer_in_use',
    message: 'the customer still owns 2 phone numbers; delete them or move them to another customer first'
  })
  const numbers = (await app.inject({ method: 'GET', url: `/v1/phone-number/list?customer_id=${customer._id}`, headers })).json()
  t.equal(numbers.length, 2)
  for (const n of numbers) {
    t.equal((await app.inject({ method: 'PATCH', url: `/v1/phone-number/${n._id}`, headers, payload: { customer_id: null } })).statusCode, 200)
  }
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/customer/${customer._id}`, headers })).statusCode, 204)
})
