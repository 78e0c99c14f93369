import t from 'tap'
import type { TranscriptItem } from '../../src/db/schema.ts'
import { storeRecordingPart } from '../../src/modules/calls/recordings.ts'
import { pcmToBuffer } from '../../src/modules/voice/audio.ts'
import { createAccount, setup } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { poll } from '../helpers/poll.ts'
import { runScript } from '../helpers/scripts.ts'
import { openWebCall, speech } from '../helpers/voice-client.ts'

// `npm run cli -- replay <call id>` (scripts/bench/replay.ts): a call made through the browser's protocol with known
// caller audio is replayed from its two-track recording, by the CLI as its own process on the test's database with
// the same stand-in providers, and the replay reproduces the original's turn boundaries.

/** Three turns: 900 ms of speech each, after a second of silence, with 2.5 s after each for the answer. */
function callerAudio (): Int16Array {
  const parts = [new Int16Array(16_000), speech(900, 2500), speech(900, 2500), speech(900, 2500)]
  const pcm = new Int16Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const part of parts) {
    pcm.set(part, at)
    at += part.length
  }
  return pcm
}

const userTurns = (transcript: TranscriptItem[]) => transcript.filter((item) => item.speaker === 'user')

t.test('a replay of a recorded call reproduces its turn boundaries and is scored as bench:turns scores', async (t) => {
  const standin = await startOpenAiHttpStandin(t)
  const providers = { VOICE_ENGINE: 'cascade', STT_URL: standin.url, LLM_URL: standin.url, TTS_URL: standin.url }
  const ctx = await setup(t, { CALL_RUNTIME: 'voice', ...providers })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: null, general_prompt: 'Answer in one short sentence.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Front desk', llm_id: llm._id } })).json()

  const made = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id, dynamic_context: { name: 'Ada' } } })).json()
  const client = await openWebCall(url, made.access_token)
  await client.sendAudio(callerAudio(), { realtime: true })
  client.hangup()
  await client.closed
  const original = await poll(async () => await ctx.db.selectFrom('calls').selectAll().where('id', '=', made._id).executeTakeFirstOrThrow(),
    (call) => call.call_status !== 'started', { message: 'the original call did not end' })
  t.equal(userTurns(original.transcription).length, 3, 'the original call heard three turns')
  const recording = await ctx.db.selectFrom('call_recordings').select(['channels']).where('call_id', '=', made._id).executeTakeFirstOrThrow()
  t.equal(recording.channels, 2, 'recorded in two tracks')

  const transcriptions = standin.requests.transcriptions.length
  const run = await runScript('cli.ts', { url: ctx.url, env: providers }, 'replay', made._id)
  t.equal(run.code, 0, run.stderr)
  t.comment(run.stdout)
  const lines = run.stdout.trimEnd().split('\n')
  const result = JSON.parse(lines.at(-1)!)
  t.equal(lines.filter((line) => line.startsWith('{')).length, 1, 'one JSON line, the last')
  t.match(run.stdout, /boundaries matched/, 'a table before it')
  t.match(result, { replay: true, call_id: made._id, turns_original: 3, turns_replayed: 3, boundaries_matched: 3, unheard_rate: 0, false_cutoff_rate: 0 })
  for (const key of ['eot_ms', 'barge_in_reaction_ms']) t.same(Object.keys(result[key]).sort(), ['p50', 'p90'], `${key}: p50 and p90`)
  t.ok(Number.isInteger(result.eot_ms.p50) && result.eot_ms.p50 >= 0, 'every turn was answered after its end')
  t.same([result.false_barge_in_rate, result.missed_barge_in_rate], [null, null], 'the caller never talked over the agent')

  // The replay is a call of the account, to the same agent, marked; its provider heard the caller again.
  const replay = await ctx.db.selectFrom('calls').selectAll().where('id', '=', result.replay_call_id).executeTakeFirstOrThrow()
  t.match(replay, { user_id: account.user.id, agent_id: agent._id, call_type: 'web', custom_data: { replay_of: made._id }, dynamic_context: { name: 'Ada' } })
  t.not(replay.call_status, 'started')
  t.equal(standin.requests.transcriptions.length - transcriptions, 3, 'three turns transcribed by the installation\'s provider')
  const starts = (call: typeof original) => userTurns(call.transcription).map((item) => item.timestamp - (call.joined_at ?? call.start_timestamp).getTime())
  const [before, after] = [starts(original), starts(replay)]
  t.equal(after.length, 3)
  // The recording starts a moment off the stream's opening (the stored joined_at): the turns keep their spacing.
  const shifts = before.map((at, i) => after[i] - at)
  t.ok(Math.max(...shifts) - Math.min(...shifts) < 300, `the turns began at ${before.join(', ')} ms after the stream opened, replayed at ${after.join(', ')} ms`)
})

t.test('what cannot be replayed is one clear line and a non-zero exit', async (t) => {
  const ctx = await setup(t, { CALL_RUNTIME: 'external' })
  const a = await createAccount(ctx.db)
  const b = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, a)
  const other = await createAgent(ctx.app, b)
  const [stereo, mono, bare, live] = await insertCalls(ctx.db, a.user.id, agent, [{ call_type: 'web' }, { call_type: 'web' }, { call_type: 'web' }, { call_type: 'web', call_status: 'started' }])
  const second = new Int16Array(16_000 * 2)
  for (const [id, channels] of [[stereo, 2], [mono, 1], [live, 2]] as const) {
    t.ok(await storeRecordingPart(ctx.db, { callId: id, userId: a.user.id, pcm: pcmToBuffer(second.subarray(0, 16_000 * channels)), channels }))
  }
  const replay = async (...args: string[]) => await runScript('cli.ts', ctx.url, 'replay', ...args)

  const cases: Array<[string[], number, RegExp]> = [
    [['65a0f0000000000000000001'], 1, /^no call 65a0f0000000000000000001\n$/],
    [[mono], 1, /recording of call \w+ was made before calls were recorded in two tracks/],
    [[bare], 1, /has no recording/],
    [[live], 1, /has not ended yet/],
    [[stereo, '--agent', other._id], 1, new RegExp(`agent ${other._id} is not an agent of the account of call ${stereo}`)],
    [[stereo, '--agent', '65a0f0000000000000000002'], 1, /is not an agent of the account/],
    [['not-an-id'], 2, /call id not-an-id is not an id/],
    [[stereo, '--agent', 'x'], 2, /--agent x is not an id/],
    [[], 2, /call id is required/]
  ]
  for (const [args, code, message] of cases) {
    const run = await replay(...args)
    t.equal(run.code, code, `${args.join(' ')}: exit ${code}`)
    t.match(run.stderr, message, args.join(' '))
    t.notMatch(run.stderr, /\n\s+at /, 'no stack trace')
  }
  t.equal((await ctx.db.selectFrom('calls').select('id').execute()).length, 4, 'no call was made')
})
