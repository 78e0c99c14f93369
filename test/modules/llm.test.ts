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

t.test('LLM configurations: turn_detection is ours by default; the provider\'s needs the realtime engine', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  const post = async (payload: Record<string, unknown>) => await app.inject({ method: 'POST', url: '/v1/llm', headers, payload })

  const plain = (await post({})).json()
  t.same(plain.turn_detection, { type: 'switchboard' }, 'ours by default')

  const server = await post({ engine: 'realtime', turn_detection: { type: 'server_vad', threshold: 0.6, silence_duration_ms: 700, prefix_padding_ms: 200 } })
  t.equal(server.statusCode, 201)
  t.same(server.json().turn_detection, { type: 'server_vad', threshold: 0.6, silence_duration_ms: 700, prefix_padding_ms: 200 })
  t.same((await app.inject({ method: 'GET', url: `/v1/llm/${server.json()._id as string}`, headers })).json().turn_detection, server.json().turn_detection, 'stored')
  t.same((await post({ engine: 'realtime', turn_detection: { type: 'semantic_vad', eagerness: 'low' } })).json().turn_detection, { type: 'semantic_vad', eagerness: 'low' })

  for (const [payload, message] of [
    [{ engine: 'cascade', turn_detection: { type: 'semantic_vad' } }, /turn_detection\.type semantic_vad .*needs engine "realtime".*cascade/],
    [{ turn_detection: { type: 'server_vad' } }, /turn_detection\.type server_vad .*needs engine "realtime".*null/],
    [{ engine: 'simulator', turn_detection: { type: 'server_vad' } }, /needs engine "realtime"/],
    [{ engine: 'realtime', turn_detection: { type: 'server_vad', eagerness: 'high' } }, /turn_detection\.eagerness is allowed only with type semantic_vad, not server_vad/],
    [{ engine: 'realtime', turn_detection: { type: 'semantic_vad', threshold: 0.5 } }, /turn_detection\.threshold is allowed only with type server_vad/],
    [{ turn_detection: { type: 'switchboard', silence_duration_ms: 500 } }, /turn_detection\.silence_duration_ms is allowed only with type server_vad, not switchboard/]
  ] as const) {
    const res = await post(payload)
    t.equal(res.statusCode, 400, JSON.stringify(payload))
    t.match(res.json(), { statusCode: 400, code: 'bad_request', message })
  }
  for (const [payload, field] of [
    [{ engine: 'realtime', turn_detection: { type: 'loud' } }, 'body.turn_detection.type'],
    [{ engine: 'realtime', turn_detection: { type: 'server_vad', threshold: 2 } }, 'body.turn_detection.threshold'],
    [{ engine: 'realtime', turn_detection: { type: 'semantic_vad', eagerness: 'eager' } }, 'body.turn_detection.eagerness'],
    [{ engine: 'realtime', turn_detection: {} }, 'body.turn_detection']
  ] as const) {
    const res = await post(payload)
    t.equal(res.statusCode, 400, JSON.stringify(payload))
    t.match(res.json(), { code: 'validation_error', message: new RegExp(field.replaceAll('.', '\\.')) })
  }

  // A PATCH is checked against what is stored.
  const id = server.json()._id as string
  const patch = async (payload: Record<string, unknown>) => await app.inject({ method: 'PATCH', url: `/v1/llm/${id}`, headers, payload })
  const away = await patch({ engine: 'cascade' })
  t.equal(away.statusCode, 400)
  t.match(away.json().message, /body\.engine cascade cannot use the configuration's turn_detection server_vad/)
  t.equal((await patch({ engine: null })).statusCode, 400)
  t.equal((await patch({ turn_detection: { type: 'semantic_vad', eagerness: 'high' } })).statusCode, 200, 'the engine stays realtime')
  const back = await patch({ engine: 'cascade', turn_detection: { type: 'switchboard' } })
  t.equal(back.statusCode, 200)
  t.match(back.json(), { engine: 'cascade', turn_detection: { type: 'switchboard' } })
  t.equal((await patch({ turn_detection: { type: 'server_vad' } })).statusCode, 400, 'the stored cascade engine cannot use it')
  t.equal((await app.inject({ method: 'PATCH', url: '/v1/llm/65a0f0000000000000000009', headers, payload: { engine: 'realtime' } })).statusCode, 404)

  // Two PATCHes that race (each right against what it read) cannot store the pair: the table refuses it.
  await patch({ engine: 'realtime' })
  const raced = await Promise.all(Array.from({ length: 20 }, (_, i) => patch(i % 2 === 0 ? { engine: 'cascade' } : { turn_detection: { type: 'server_vad' } })))
  t.ok(raced.every((res) => res.statusCode === 200 || res.statusCode === 400), 'no 500')
  const final = (await app.inject({ method: 'GET', url: `/v1/llm/${id}`, headers })).json()
  t.ok(final.turn_detection.type === 'switchboard' || final.engine === 'realtime', `stored ${final.engine as string} with ${final.turn_detection.type as string}`)
})
