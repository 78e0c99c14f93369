import { randomUUID } from 'node:crypto'
import t from 'tap'
import { newId } from '../../src/db/ids.ts'
import { storeRecordingPart } from '../../src/modules/calls/recordings.ts'
import { encodeWav } from '../../src/modules/voice/audio.ts'
import { createAccount, setup } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { PAGE_HEADERS, signedInWithKey } from '../helpers/console-client.ts'

const callIdsOf = (body: string) => [...body.matchAll(/<a href="\/calls\/([0-9a-f]{24})">/g)].map((m) => m[1])

t.test('the list: only one\'s own calls, newest first, with their columns; filters; a bad filter is a 400 page', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const one = await createAgent(ctx.app, account, { agent_name: 'Front desk' })
  const two = await createAgent(ctx.app, account, { agent_name: 'Sales <b>' })
  const [c1, c2] = await insertCalls(ctx.db, user.id, one, [
    { start_timestamp: new Date('2026-05-01T09:30:00Z'), direction: 'inbound', call_type: 'phone', call_status: 'success', duration_ms: 65_000, sentiment: 'positive', phone_call_credits: 7, call_forwarding_credits: 3 },
    { start_timestamp: new Date('2026-05-02T10:00:00Z'), direction: 'outbound', call_type: 'web', call_from: null, call_to: null, call_status: 'failed', duration_ms: 3_723_000, web_call_credits: 2 }
  ])
  const [c3] = await insertCalls(ctx.db, user.id, two, [{ start_timestamp: new Date('2026-05-03T00:00:00Z'), call_status: 'started', end_timestamp: null, duration_ms: null }])
  const other = await createAccount(ctx.db)
  const [foreign] = await insertCalls(ctx.db, other.user.id, await createAgent(ctx.app, other, { agent_name: 'Not mine' }), [{ start_timestamp: new Date('2026-05-02T12:00:00Z') }])

  const page = await browser.get('/calls')
  t.equal(page.statusCode, 200)
  t.match(page.headers['content-type'], 'text/html')
  t.match(page.body, /<a href="\/calls" aria-current="page">Calls<\/a>/)
  t.same(callIdsOf(page.body), [c3, c2, c1], 'newest first, only the account\'s')
  t.notMatch(page.body, foreign)
  t.notMatch(page.body, 'Not mine')
  t.match(page.body, '<time datetime="2026-05-01T09:30:00.000Z">2026-05-01 09:30:00 UTC</time>')
  t.match(page.body, /<td>\+14155550100<\/td>\s*<td>\+14155550199<\/td>\s*<td>Front desk<\/td>\s*<td>Phone, inbound<\/td>\s*<td>Success<\/td>\s*<td>1:05<\/td>\s*<td>Positive<\/td>\s*<td class="number">10<\/td>/, 'from and to')
  t.match(page.body, /<td>—<\/td>\s*<td>—<\/td>\s*<td>Front desk<\/td>\s*<td>Web, outbound<\/td>\s*<td>Failed<\/td>\s*<td>1:02:03<\/td>\s*<td>—<\/td>\s*<td class="number">2<\/td>/)
  t.match(page.body, '<strong>3 calls</strong>', 'the total')
  t.match(page.body, '<script src="/console/local-time.js" defer></script>', 'times in the viewer\'s zone (the layout links it)')
  t.match(page.body, /<td>Sales &lt;b&gt;<\/td>/, 'names are text')
  t.match(page.body, `<option value="${two._id}">Sales &lt;b&gt;</option>`, 'the agent filter lists the agents')
  t.match(page.body, '<div class="table"><table class="calls-list">', 'the table scrolls on a small screen')

  const list = async (query: string) => {
    const res = await browser.get(`/calls${query}`)
    t.equal(res.statusCode, 200, query)
    return callIdsOf(res.body)
  }
  t.same(await list(`?agent=${one._id}`), [c2, c1])
  t.same(await list(`?agent=${one._id.toUpperCase()}`), [c2, c1], 'ids in either case')
  t.same(await list('?status=started'), [c3])
  t.same(await list('?type=web'), [c2])
  t.same(await list('?direction=inbound'), [c1])
  t.same(await list('?from=2026-05-02'), [c3, c2])
  t.same(await list('?to=2026-05-02'), [c2, c1], '"to" includes its whole day')
  t.same(await list('?from=2026-05-02&to=2026-05-02&status=&type=&direction=&agent='), [c2], 'empty fields mean any')
  t.same(await list(`?agent=${newId()}`), [], 'an agent without calls')
  const filtered = await browser.get(`/calls?agent=${one._id}&status=failed&from=2026-05-01`)
  t.match(filtered.body, `<option value="${one._id}" selected>Front desk</option>`, 'the form keeps the filters')
  t.match(filtered.body, '<option value="failed" selected>Failed</option>')
  t.match(filtered.body, 'name="from" type="date" value="2026-05-01"')
  t.match((await browser.get('/calls?status=success&to=2026-04-01')).body, /No calls match/)

  for (const [query, message] of [
    ['?status=done', /The status must be one of/],
    ['?type=fax', /The type must be one of/],
    ['?direction=sideways', /The direction must be one of/],
    ['?agent=xyz', /not a valid agent id/],
    ['?from=yesterday', /“From” must be a calendar day written YYYY-MM-DD/],
    ['?from=2026-02-30', /“From” must be a calendar day/],
    ['?to=2026-13-01', /“To” must be a calendar day/],
    ['?from=2026-05-02&to=2026-05-01', /“To” must not be before “from”/],
    ['?before=50', /page position must be a call id/],
    [`?before=${c1}&after=${c2}`, /either before or after a call, not both/],
    [`?q=${'x'.repeat(201)}`, /search must be at most 200 characters/],
    ['?q=a&q=b', /“q” was given more than once/],
    ['?column=1st', /A column must be an extracted field/],
    [`?${['a', 'b', 'c', 'd', 'e', 'f'].map((name) => `column=${name}`).join('&')}`, /at most 5 extracted fields/],
    ['?status=success&status=failed', /“status” was given more than once/],
    ['?from=%22%3E%3Cscript%3E', /must be a calendar day/]
  ] as const) {
    const res = await browser.get(`/calls${query}`)
    t.equal(res.statusCode, 400, query)
    t.match(res.body, message, query)
    t.match(res.body, /<p class="notice error" role="alert">/)
    t.match(res.body, /<form method="get" action="\/calls"/, 'the form is there to correct it')
    t.notMatch(res.body, /<table/, 'no calls listed')
    t.notMatch(res.body, /<script>/i)
  }

  const signedOut = await ctx.app.inject({ method: 'GET', url: '/calls' })
  t.equal(signedOut.statusCode, 303)
  t.equal(signedOut.headers.location, '/login?next=%2Fcalls')
})

t.test('keyset paging: 50 a page, older and newer links keep the filters and columns, a stale position pages nothing', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account)
  // Two calls at each start time: the call id orders them.
  const seeds = Array.from({ length: 120 }, (_, i) => ({ start_timestamp: new Date(Date.UTC(2026, 4, 1, 0, Math.floor(i / 2))), direction: i % 3 === 0 ? 'inbound' as const : 'outbound' as const }))
  const ids = await insertCalls(ctx.db, user.id, agent, seeds)
  const ordered = ids.map((id, i) => ({ id, at: seeds[i].start_timestamp.getTime(), direction: seeds[i].direction }))
    .sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : -1))
  const outbound = ordered.filter((call) => call.direction === 'outbound').map((call) => call.id)
  t.equal(outbound.length, 80)
  const hrefOf = (body: string, rel: 'prev' | 'next') => {
    const match = new RegExp(`<a href="([^"]+)" rel="${rel}">`).exec(body)
    return match?.[1].replaceAll('&amp;', '&')
  }

  const first = await browser.get('/calls?direction=outbound&column=city')
  t.same(callIdsOf(first.body), outbound.slice(0, 50))
  t.match(first.body, '<strong>80 calls</strong>')
  t.equal(hrefOf(first.body, 'next'), `/calls?direction=outbound&column=city&before=${outbound[49]}`)
  t.equal(hrefOf(first.body, 'prev'), undefined, 'no newer page')

  const second = await browser.get(hrefOf(first.body, 'next')!)
  t.same(callIdsOf(second.body), outbound.slice(50), 'the older page')
  t.equal(hrefOf(second.body, 'next'), undefined, 'the last page')
  t.equal(hrefOf(second.body, 'prev'), `/calls?direction=outbound&column=city&after=${outbound[50]}`)
  t.match(second.body, '<a href="/calls?direction=outbound&amp;column=city">Newest calls</a>')

  const back = await browser.get(hrefOf(second.body, 'prev')!)
  t.same(callIdsOf(back.body), outbound.slice(0, 50), 'back to the first page, newest first')
  t.equal(hrefOf(back.body, 'prev'), undefined, 'nothing newer')
  t.equal(hrefOf(back.body, 'next'), `/calls?direction=outbound&column=city&before=${outbound[49]}`)

  const all = ordered.map((call) => call.id)
  const middle = await browser.get(`/calls?before=${all[9]}`)
  t.same(callIdsOf(middle.body), all.slice(10, 60))
  const newer = await browser.get(hrefOf(middle.body, 'prev')!)
  t.same(callIdsOf(newer.body), all.slice(0, 10), 'a newer page of fewer than 50')
  t.same(callIdsOf((await browser.get(`/calls?after=${all[59]}`)).body), all.slice(9, 59), 'newer than a call: the 50 just before it')

  const other = await createAccount(ctx.db)
  const [foreign] = await insertCalls(ctx.db, other.user.id, await createAgent(ctx.app, other), [{ start_timestamp: new Date(Date.UTC(2026, 4, 1, 0, 30)) }])
  for (const query of [`?before=${newId()}`, `?after=${newId()}`, `?before=${foreign}`]) {
    const res = await browser.get(`/calls${query}`)
    t.equal(res.statusCode, 200, query)
    t.same(callIdsOf(res.body), [], 'an unknown or another account\'s call is no position')
    t.match(res.body, /No more calls\. <a href="\/calls">The newest calls<\/a>/)
  }
})

t.test('a call\'s page: facts, summary, sentiment, extracted fields, transcript (escaped), credits, deliveries', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account, { agent_name: 'Front desk' })
  const start = Date.parse('2026-05-01T09:30:00Z')
  const [id] = await insertCalls(ctx.db, user.id, agent, [{
    start_timestamp: new Date(start),
    direction: 'inbound',
    call_from: '+14155550100',
    call_to: '+14155550199',
    duration_ms: 95_000,
    disconnection_reason: 'user_hangup',
    call_summary: 'The caller <em>booked</em> a table for two.',
    sentiment: 'positive',
    sentiment_explanation: 'Thanked the agent & said "great".',
    task_achieved: true,
    custom_analysis_data: JSON.stringify({ party_size: 2, name: '<img src=x onerror=alert(1)>' }),
    phone_call_credits: 12,
    text_message_credits: 1,
    call_forwarding_credits: 4,
    transcription: [
      { speaker: 'agent', content: 'Hello, how can I help?', timestamp: start + 1_000 },
      { speaker: 'user', content: '<script>alert(1)</script>', timestamp: start + 5_000 }
    ]
  }])
  // A tool line, as the voice engine stores it (the helper's seed type knows only speech).
  await ctx.db.updateTable('calls').set({
    transcription: JSON.stringify([
      { speaker: 'agent', content: 'Hello, how can I help?', timestamp: start + 1_000 },
      { speaker: 'user', content: '<script>alert(1)</script>', timestamp: start + 5_000 },
      { speaker: 'tool', content: '', timestamp: start + 70_000, tool: { name: 'book_table', type: 'api_call', arguments: '{"size":2}', output: 'booked' } }
    ])
  }).where('id', '=', id).execute()
  const deliveryId = newId()
  await ctx.db.insertInto('webhook_deliveries').values({
    id: deliveryId, user_id: user.id, delivery_id: randomUUID(), correlation_id: randomUUID(), call_id: id, agent_id: agent._id, kind: 'agent_webhook',
    name: 'call_analyzed', status: 'failed', method: 'POST', url: 'https://hooks.example.test/x', body: JSON.stringify({}), variables: null,
    schedule: [0], attempts_max: 2, attempts_made: 2,
    attempts: JSON.stringify([{ n: 1, at: '2026-05-01T09:32:00.000Z', duration_ms: 20, status_code: 500 }, { n: 2, at: '2026-05-01T09:33:00.000Z', duration_ms: 20, status_code: 503 }])
  }).execute()

  const page = await browser.get(`/calls/${id}`)
  t.equal(page.statusCode, 200)
  t.match(page.body, '<title>Phone call with Front desk · Switchboard</title>', 'no time in the title: times are written where the viewer\'s zone replaces them')
  t.match(page.body, /<a href="\/calls" aria-current="page">Calls<\/a>/)
  t.match(page.body, `<dt>Agent</dt><dd><a href="/agents/${agent._id}">Front desk</a></dd>`, 'the agent linked')
  for (const [label, value] of [['Type', 'Phone, inbound'], ['From', '+14155550100'], ['To', '+14155550199'],
    ['Duration', '1:35'], ['Status', 'Success'], ['How it ended', 'The caller hung up'], ['Task achieved', 'Yes'], ['Credits', '<a href="#cost-title">17</a>']]) {
    t.match(page.body, `<dt>${label}</dt><dd>${value}</dd>`, label)
  }
  t.match(page.body, '<dt>Started</dt><dd><time datetime="2026-05-01T09:30:00.000Z">2026-05-01 09:30:00 UTC</time></dd>')
  t.match(page.body, '<p>The caller &lt;em&gt;booked&lt;/em&gt; a table for two.</p>', 'the summary, as text')
  t.match(page.body, '<strong>Positive</strong>: Thanked the agent &amp; said &quot;great&quot;.')
  t.match(page.body, '<tr><td>party_size</td><td>2</td></tr>')
  t.match(page.body, '<tr><td>name</td><td>&lt;img src=x onerror=alert(1)&gt;</td></tr>')
  t.match(page.body, /<li class="agent"><span class="at">0:01<\/span> <strong>Agent:<\/strong> Hello, how can I help\?<\/li>/, 'without a recording, lines do not seek')
  t.match(page.body, /<strong>Caller:<\/strong> &lt;script&gt;alert\(1\)&lt;\/script&gt;<\/li>/, 'the transcript, escaped')
  t.match(page.body, /<li class="tool"><span class="at">1:10<\/span> <strong>Tool<\/strong> <code>book_table<\/code> \(api_call\): arguments <code>\{&quot;size&quot;:2\}<\/code>; answered <code>booked<\/code><\/li>/)
  t.notMatch(page.body, /<script(?! src="\/console\/local-time\.js")|<img|<em>/i, 'nothing of the user\'s content is markup')
  t.match(page.body, '<tr><td>Phone line (carrier)</td><td>2 started minutes</td><td class="number">12</td></tr>', 'cost per provider: the carrier\'s minutes')
  t.match(page.body, '<tr><td>Text messages</td><td>—</td><td class="number">1</td></tr><tr><td>Call forwarding</td><td>—</td><td class="number">4</td></tr>')
  t.match(page.body, '<tfoot><tr><th scope="row">Total</th><td></td><td class="number">17</td></tr></tfoot>', 'and the total')
  t.notMatch(page.body, /Language model|Speech recognition|Speech synthesis/, 'no model or speech used, no rows for them')
  t.match(page.body, `<td><a href="/deliveries/${deliveryId}">Webhook</a></td><td>call_analyzed</td><td>failed</td><td>2 of 2</td><td><time datetime="2026-05-01T09:33:00.000Z">2026-05-01 09:33:00 UTC</time> (HTTP 503)</td>`, 'a delivery links to its page')
  t.notMatch(page.body, /<audio/, 'no recording, no player')

  const web = (await insertCalls(ctx.db, user.id, agent, [{ call_type: 'web', call_from: null, call_to: null, end_timestamp: null, duration_ms: null, call_status: 'started' }]))[0]
  const running = await browser.get(`/calls/${web}`)
  t.equal(running.statusCode, 200)
  t.notMatch(running.body, '<dt>From</dt>', 'a web call has no numbers')
  t.match(running.body, '<dt>Ended</dt><dd>—</dd>')
  t.match(running.body, /No summary/)
  t.match(running.body, /<h2>Sentiment<\/h2>\s*<p>Not analysed.<\/p>/)
  t.match(running.body, /No transcript/)
  t.notMatch(running.body, /Extracted fields|<h2>Deliveries/)
})

t.test('a call\'s page with a recording: lines seek from the recording\'s start, each answer shows its turn\'s timings, cost per provider', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account, { agent_name: 'Front desk' })
  const start = Date.parse('2026-05-01T09:30:00Z')
  const turn = (at: number, e2e: number, cut = false) => ({ at, end_of_turn_ms: 200, transcription_ms: null, llm_ms: 300, tts_ms: null, e2e_ms: e2e, ...(cut && { interrupted: true }) })
  const stat = { p50: 700, p90: 900, min: 600, max: 1000, num: 2 }
  const [id] = await insertCalls(ctx.db, user.id, agent, [{
    start_timestamp: new Date(start),
    end_timestamp: new Date(start + 20_000),
    duration_ms: 20_000,
    web_call_credits: 5,
    call_type: 'web',
    call_from: null,
    call_to: null,
    token_usage: { 'gpt-4o-mini': { input: 1200, output: 300 } },
    speech_recognised_seconds: 6.5,
    speech_synthesised_seconds: 9,
    latency: JSON.stringify({ e2e: stat, end_of_turn: stat, transcription: null, llm: stat, tts: null, turns: [turn(start + 13_000, 650), turn(start + 16_000, 1000, true)] }),
    transcription: [
      { speaker: 'agent', content: 'Hello.', timestamp: start + 10_500 },
      { speaker: 'user', content: 'A table, please.', timestamp: start + 12_000 },
      { speaker: 'agent', content: 'For when?', timestamp: start + 13_700 },
      { speaker: 'user', content: 'Tonight.', timestamp: start + 15_000 },
      { speaker: 'agent', content: 'Booked.', timestamp: start + 17_000 }
    ]
  }])
  // Ten seconds recorded, up to the call's end: the recording began 10 s after the call's record (a web call's record
  // exists before its audio), so the lines count from there.
  t.ok(await storeRecordingPart(ctx.db, { callId: id, userId: user.id, pcm: Buffer.alloc(16_000 * 2 * 10) }))

  const page = await browser.get(`/calls/${id}`)
  t.equal(page.statusCode, 200)
  t.match(page.body, '<h2 id="transcript-title">Recording and transcript</h2>')
  t.match(page.body, '<li class="agent" data-at="0.50"><span class="at">0:01</span> <strong>Agent:</strong> Hello.</li>', 'the greeting answers no turn')
  t.match(page.body, '<li class="user" data-at="2.00"><span class="at">0:02</span> <strong>Caller:</strong> A table, please.</li>')
  t.match(page.body, '<li class="agent" data-at="3.70"><span class="at">0:04</span> <strong>Agent:</strong> For when? <span class="turn-time">Answered in 650 ms (end of turn 200 ms, model 300 ms)</span></li>',
    'an answer shows its turn: what the caller waited and the stages the providers have')
  t.match(page.body, '<strong>Agent:</strong> Booked. <span class="turn-time">Answered in 1,000 ms (end of turn 200 ms, model 300 ms); the caller cut it off</span>', 'an answer the caller talked over says so')
  t.match(page.body, '<script src="/console/call-page.js" defer></script>')
  t.match(page.body, '<dt>Caller waited</dt><dd>700 ms typically (p50), 900 ms at p90</dd>')
  t.match(page.body, '<tr><td>Web call</td><td>1 started minute</td><td class="number">5</td></tr>')
  t.match(page.body, '<tr><td>Language model <code>gpt-4o-mini</code></td><td>1,200 tokens in, 300 out</td><td class="number">included</td></tr>')
  t.match(page.body, '<tr><td>Speech recognition</td><td>6.5 s of the caller&#39;s speech</td><td class="number">included</td></tr>')
  t.match(page.body, '<tr><td>Speech synthesis</td><td>9 s of the agent&#39;s speech</td><td class="number">included</td></tr>')

  t.equal((await browser.get(`/calls/${id}?channels=2&anything=1`)).statusCode, 200, 'a query the page does not read is dropped')
  const repeated = await browser.get(`/calls/${id}/recording.wav?channels=2&channels=1`)
  t.equal(repeated.statusCode, 400, 'a repeated channels is refused by the route\'s schema')
  t.match(repeated.headers['content-type'], 'text/html')

  const script = await browser.get('/console/call-page.js')
  t.equal(script.statusCode, 200)
  t.match(script.headers['content-type'], 'text/javascript')
  t.match(script.body, 'currentTime')
})

t.test('every page with a time links the local-time script, and its times are <time datetime> in UTC', async (t) => {
  const ctx = await setup(t)
  const { browser } = await signedInWithKey(ctx)
  const keys = await browser.get('/keys')
  t.match(keys.body, '<script src="/console/local-time.js" defer></script>')
  t.match(keys.body, /<td><time datetime="\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z">\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC<\/time><\/td>/, 'a key\'s creation')
  t.notMatch((await browser.get('/account/password')).body, /<script/, 'a page without a time loads no script')
  const script = await ctx.app.inject({ method: 'GET', url: '/console/local-time.js' })
  t.equal(script.statusCode, 200, 'served without a session')
})

t.test('another account\'s call, an unknown id and a malformed one are the console\'s 404 page', async (t) => {
  const ctx = await setup(t)
  const { browser } = await signedInWithKey(ctx)
  const other = await createAccount(ctx.db)
  const [foreign] = await insertCalls(ctx.db, other.user.id, await createAgent(ctx.app, other), [{ call_summary: 'their secret' }])
  for (const id of [foreign, newId()]) {
    const res = await browser.get(`/calls/${id}`)
    t.equal(res.statusCode, 404, id)
    t.match(res.headers['content-type'], 'text/html')
    t.match(res.body, /<h1>No such call<\/h1>/)
    t.match(res.body, /Sign out/, 'in the signed-in layout')
    t.notMatch(res.body, 'their secret')
  }
  // A malformed id is refused by the route's schema: the console's 404 page.
  for (const url of ['/calls/not-an-id', '/calls/not-an-id/recording.wav']) {
    const res = await browser.get(url)
    t.equal(res.statusCode, 404, url)
    t.match(res.headers['content-type'], 'text/html')
    t.match(res.body, '<h1>Page not found</h1>')
    t.match(res.body, /Sign out/, 'in the signed-in layout')
  }
})

t.test('the recording: a player on the call\'s page; the WAV (ranges too) for the owner only', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const [id] = await insertCalls(ctx.db, user.id, await createAgent(ctx.app, account), [{}])
  const pcm = new Int16Array(478).fill(7)
  const wav = encodeWav(pcm)
  t.ok(await storeRecordingPart(ctx.db, { callId: id, userId: user.id, pcm: Buffer.from(pcm.buffer) }))

  const page = await browser.get(`/calls/${id}`)
  t.match(page.body, `<audio id="recording" controls preload="metadata" src="/calls/${id}/recording.wav">`)
  t.notMatch(page.body, account.key, 'no API key on the page')

  const whole = await browser.get(`/calls/${id}/recording.wav`)
  t.equal(whole.statusCode, 200)
  t.equal(whole.headers['content-type'], 'audio/wav')
  t.equal(whole.headers['accept-ranges'], 'bytes')
  t.same(whole.rawPayload, wav)
  const part = await ctx.app.inject({ method: 'GET', url: `/calls/${id}/recording.wav`, headers: { cookie: browser.cookieHeader, range: 'bytes=0-3' } })
  t.equal(part.statusCode, 206)
  t.equal(part.headers['content-range'], 'bytes 0-3/1000')
  t.equal(part.body, 'RIFF')
  const past = await ctx.app.inject({ method: 'GET', url: `/calls/${id}/recording.wav`, headers: { cookie: browser.cookieHeader, range: 'bytes=5000-' } })
  t.equal(past.statusCode, 416)
  t.equal(past.headers['content-range'], 'bytes */1000')

  const stranger = await signedInWithKey(ctx)
  const refused = await stranger.browser.get(`/calls/${id}/recording.wav`)
  t.equal(refused.statusCode, 404)
  t.match(refused.headers['content-type'], 'text/html')
  t.notMatch(refused.body, 'RIFF')
  const noRecording = (await insertCalls(ctx.db, user.id, await createAgent(ctx.app, account), [{}]))[0]
  t.equal((await browser.get(`/calls/${noRecording}/recording.wav`)).statusCode, 404, 'a call without a recording')
  const twice = await browser.get(`/calls/${id}/recording.wav?channels=2&channels=1`)
  t.equal(twice.statusCode, 400, 'a repeated choice of tracks: a page in words')
  t.match(twice.headers['content-type'], 'text/html')
  t.match(twice.body, 'The choice of tracks was given more than once. Check the address')
  const signedOut = await ctx.app.inject({ method: 'GET', url: `/calls/${id}/recording.wav` })
  t.equal(signedOut.statusCode, 303)
  t.equal(signedOut.headers.location, `/login?next=%2Fcalls%2F${id}%2Frecording.wav`)

  // A recording in two tracks (calls since issue 27): the page offers the stereo file too; the old one above does not.
  t.notMatch(page.body, 'channels=2', 'a mono recording: no tracks to offer')
  const [twoTracks] = await insertCalls(ctx.db, user.id, await createAgent(ctx.app, account), [{}])
  const stereo = Buffer.alloc(400)
  for (let i = 0; i < 100; i++) stereo.writeInt16LE(1000, 4 * i) // the caller alone
  t.ok(await storeRecordingPart(ctx.db, { callId: twoTracks, userId: user.id, pcm: stereo, channels: 2 }))
  t.match((await browser.get(`/calls/${twoTracks}`)).body, `href="/calls/${twoTracks}/recording.wav?channels=2"`)
  const tracks = await browser.get(`/calls/${twoTracks}/recording.wav?channels=2`)
  t.equal(tracks.statusCode, 200)
  t.equal(tracks.rawPayload.readUInt16LE(22), 2, 'stereo')
  t.ok(tracks.rawPayload.subarray(44).equals(stereo))
  t.same((await browser.get(`/calls/${twoTracks}/recording.wav`)).rawPayload, encodeWav(new Int16Array(100).fill(1000)), 'and the mono mix by default')
})

t.test('the Calls pages carry the console\'s security headers and nothing inline', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const [id] = await insertCalls(ctx.db, user.id, await createAgent(ctx.app, account), [{ transcription: [{ speaker: 'user', content: 'hi', timestamp: Date.now() }] }])
  const answers = [await browser.get('/calls'), await browser.get('/calls?status=bad'), await browser.get(`/calls/${id}`), await browser.get(`/calls/${newId()}`)]
  for (const res of answers) {
    t.match(res.headers, PAGE_HEADERS, `${res.statusCode}`)
    t.match(res.body, /<main id="main"/)
    t.notMatch(res.body, /<script(?! src="\/console\/(local-time|call-page)\.js")|<style|style=/i, 'nothing inline that the CSP would block')
  }
})
