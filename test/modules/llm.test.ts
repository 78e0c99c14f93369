import t from 'tap'
import { createAccount, setup } from '../helpers/app.ts'

t.test('LLM configurations: create with defaults, read, update, list, delete', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)

  const created = await app.inject({ method: 'POST', url: '/v1/llm', headers, payload: { general_prompt: 'Be brief.', unknown: 1 } })
  t.equal(created.statusCode, 201)
  const llm = created.json()
  t.match(llm, { _id: /^[0-9a-f]{24}$/, model: 'gpt-4o-mini', begin_message: null, general_prompt: 'Be brief.', temperature: 0.7, max_tokens: null, created_at: Number, updated_at: Number })
  t.notOk('unknown' in llm)

  const got = await app.inject({ method: 'GET', url: `/v1/llm/${llm._id}`, headers })
  t.same(got.json(), llm)

  const patched = await app.inject({ method: 'PATCH', url: `/v1/llm/${llm._id}`, headers, payload: { model: 'gpt-4o', begin_message: 'Hello {{name}}', temperature: 0.2, max_tokens: 400 } })
  t.equal(patched.statusCode, 200)
  t.match(patched.json(), { model: 'gpt-4o', begin_message: 'Hello {{name}}', general_prompt: 'Be brief.', temperature: 0.2, max_tokens: 400 })

  const list = await app.inject({ method: 'GET', url: '/v1/llm/list', headers })
  t.same(list.json().map((l: { _id: string }) => l._id), [llm._id])

  t.equal((await app.inject({ method: 'DELETE', url: `/v1/llm/${llm._id}`, headers })).statusCode, 204)
  t.equal((await app.inject({ method: 'GET', url: `/v1/llm/${llm._id}`, headers })).statusCode, 404)
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/llm/${llm._id}`, headers })).statusCode, 404)
})

t.test('LLM configurations: validation, isolation, and deletion while used', async (t) => {
  const { app, db } = await setup(t)
  const a = await createAccount(db)
  const b = await createAccount(db)

  for (const [payload, field] of [
    [{ temperature: 3 }, 'body.temperature'],
    [{ model: '' }, 'body.model'],
    [{ max_tokens: 0 }, 'body.max_tokens'],
    [{ general_prompt: 5 }, 'body.general_prompt']
  ] as const) {
    const res = await app.inject({ method: 'POST', url: '/v1/llm', headers: a.headers, payload })
    t.equal(res.statusCode, 400, JSON.stringify(payload))
    t.match(res.json(), { code: 'validation_error', message: new RegExp(`^${field.replace('.', '\\.')} `) })
  }

  const llm = (await app.inject({ method: 'POST', url: '/v1/llm', headers: a.headers, payload: {} })).json()
  for (const [method, url] of [['GET', `/v1/llm/${llm._id}`], ['PATCH', `/v1/llm/${llm._id}`], ['DELETE', `/v1/llm/${llm._id}`]] as const) {
    const res = await app.inject({ method, url, headers: b.headers, payload: method === 'PATCH' ? { model: 'x' } : undefined })
    t.equal(res.statusCode, 404, `${method} of another account's configuration`)
  }
  t.same((await app.inject({ method: 'GET', url: '/v1/llm/list', headers: b.headers })).json(), [])
  t.equal((await app.inject({ method: 'GET', url: '/v1/llm/123', headers: a.headers })).json().code, 'invalid_id')

  const agent = await app.inject({ method: 'POST', url: '/v1/agent', headers: a.headers, payload: { agent_name: 'A', llm_id: llm._id } })
  t.equal(agent.statusCode, 201)
  const refused = await app.inject({ method: 'DELETE', url: `/v1/llm/${llm._id}`, headers: a.headers })
  t.equal(refused.statusCode, 409)
  t.match(refused.json(), { code: 'llm_in_use', message: /used by 1 agent/ })
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/agent/${agent.json()._id}`, headers: a.headers })).statusCode, 204)
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/llm/${llm._id}`, headers: a.headers })).statusCode, 204)
})
