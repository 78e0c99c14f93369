import t from 'tap'
import { createAccount, setup } from '../helpers/app.ts'

t.test('malformed path ids answer 400 before any query', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  for (const id of ['123', 'zzzzzzzzzzzzzzzzzzzzzzzz', '65a0f00000000000000000011', "' or 1=1 --"]) {
    const res = await app.inject({ method: 'DELETE', url: `/v1/api-keys/${encodeURIComponent(id)}`, headers })
    t.equal(res.statusCode, 400, id)
    t.same(res.json(), { statusCode: 400, error: 'Bad Request', message: 'params.id must be a 24-character hexadecimal id', code: 'invalid_id' })
  }
  const wellFormed = await app.inject({ method: 'DELETE', url: '/v1/api-keys/65a0f0000000000000000001', headers })
  t.equal(wellFormed.statusCode, 404)
  t.same(wellFormed.json(), { statusCode: 404, error: 'Not Found', message: 'API key not found', code: 'not_found' })
})

t.test('unknown body properties are dropped, never stored', async (t) => {
  const { app, db } = await setup(t)
  const { headers, user } = await createAccount(db)
  const res = await app.inject({ method: 'POST', url: '/v1/api-keys', headers, payload: { name: 'ci', user_id: '65a0f0000000000000000001', revoked_at: 1, admin: true } })
  t.equal(res.statusCode, 201)
  t.notOk('admin' in res.json())
  const row = await db.selectFrom('api_keys').selectAll().where('id', '=', res.json()._id).executeTakeFirstOrThrow()
  t.equal(row.user_id, user.id, 'a body cannot move a record to another account')
  t.equal(row.revoked_at, null)
  t.equal(row.name, 'ci')
})

t.test('validation errors name the field; bodies are not coerced', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  const wrongType = await app.inject({ method: 'POST', url: '/v1/api-keys', headers, payload: { name: 5 } })
  t.equal(wrongType.statusCode, 400)
  t.same(wrongType.json(), { statusCode: 400, error: 'Bad Request', message: 'body.name must be string', code: 'validation_error' })

  const tooLong = await app.inject({ method: 'POST', url: '/v1/api-keys', headers, payload: { name: 'x'.repeat(101) } })
  t.match(tooLong.json(), { statusCode: 400, message: /^body\.name must NOT have more than 100 characters/ })

  const badEnum = await app.inject({ method: 'GET', url: '/v1/voice/list?gender=robot', headers })
  t.match(badEnum.json(), { statusCode: 400, code: 'validation_error', message: /^query\.gender\.0 .*\(female, male, neutral\)/ })

  const badLimit = await app.inject({ method: 'GET', url: '/v1/voice/list?limit=1001', headers })
  t.match(badLimit.json(), { statusCode: 400, message: /^query\.limit must be <= 1000/ })
  for (const url of ['/v1/voice/list?skip=1e21', '/v1/call/list?skip=1e21', '/v1/agent/list?skip=-1']) {
    t.equal((await app.inject({ method: 'GET', url, headers })).statusCode, 400, url)
  }
  t.same((await app.inject({ method: 'GET', url: `/v1/call/list?skip=${Number.MAX_SAFE_INTEGER}`, headers })).json(), [])
})

t.test('client mistakes are 4xx with the error shape, never 500', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  const cases = [
    { payload: '{"name":', type: 'application/json', status: 400 },
    { payload: 'name=x', type: 'application/x-www-form-urlencoded', status: 415 },
    { payload: JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }), type: 'application/json', status: 413 },
    { payload: '', type: 'application/json', status: 400 },
    { payload: '[]', type: 'application/json', status: 400 },
    { payload: 'null', type: 'application/json', status: 400 }
  ]
  for (const c of cases) {
    const res = await app.inject({ method: 'POST', url: '/v1/api-keys', headers: { ...headers, 'content-type': c.type }, payload: c.payload })
    t.equal(res.statusCode, c.status, `${c.type} ${c.payload.slice(0, 10)}`)
    t.match(res.json(), { statusCode: c.status, error: String, message: String, code: String })
  }
  const unknownRoute = await app.inject({ method: 'GET', url: '/v1/nothing-here', headers })
  t.equal(unknownRoute.statusCode, 404)
  t.equal(unknownRoute.json().code, 'route_not_found')
})

t.test('list filters take repeated keys and comma lists; paging defaults and limits', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  const get = async (query: string) => {
    const res = await app.inject({ method: 'GET', url: `/v1/voice/list${query}`, headers })
    t.equal(res.statusCode, 200, query)
    return res.json() as Array<{ _id: string, gender: string, provider: string, languages: string[] }>
  }
  const all = await get('')
  t.ok(all.length >= 20, 'the catalogue is filled by a migration')
  const comma = await get('?gender=female,neutral')
  const repeated = await get('?gender=female&gender=neutral')
  t.same(comma, repeated)
  t.same(new Set(comma.map((v) => v.gender)), new Set(['female', 'neutral']))
  t.equal(comma.length, all.filter((v) => v.gender !== 'male').length)

  const german = await get('?language=de')
  t.ok(german.length >= 4)
  t.ok(german.every((v) => v.languages.some((l) => l.startsWith('de-'))))
  t.ok(german.some((v) => v.languages.includes('de-AT')), '`de` matches every German region')
  const austrian = await get('?language=de-AT')
  t.ok(austrian.every((v) => v.languages.includes('de-AT')))
  t.ok(austrian.length < german.length)

  const page = await get('?limit=5&skip=5')
  t.same(page.map((v) => v._id), all.slice(5, 10).map((v) => v._id))
})
