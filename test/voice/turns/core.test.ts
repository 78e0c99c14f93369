// The turn core with a clock moved by hand: whole conversations (pauses, backchannels, resume, barge-in,
// reminders, timings) in milliseconds, without a database, a socket or a provider.
import t from 'tap'
import { confirmMs, NO_WORDS_MS, RESUME_AFTER_MS, TurnCore, WORDS_QUIET_MS, type CoreCalls, type CoreOptions } from '../../../src/modules/voice/turns/core.ts'
import { ManualClock } from '../../../src/modules/voice/turns/clock.ts'

/** 20 ms of agent audio whose first sample numbers the frame, so that the order of what went out can be read. */
const frame = (n: number) => Int16Array.from({ length: 320 }, (_, i) => i === 0 ? n : 1)

function setup (options: Partial<CoreOptions> = {}) {
  const clock = new ManualClock()
  const log: string[] = []
  const sent: number[] = []
  const timed: Array<Parameters<CoreCalls['timed']>[0]> = []
  const detector = { quick: false }
  /** When each callback came (clock time), by name. */
  const at: Record<string, number[]> = {}
  const note = (name: string) => { (at[name] ??= []).push(clock.now()) }
  const calls: CoreCalls = {
    send: (event) => { if (event.type !== 'agent_text' && event.type !== 'transcript_partial') log.push(`${event.type}${'speaking' in event ? `:${event.speaking}` : ''}`) },
    sendAudio: (pcm) => { sent.push(pcm[0]) },
    answer: () => log.push('answer'),
    prepare: (text) => log.push(`prepare:${text}`),
    cancel: (heardMs) => log.push(`cancel:${heardMs}`),
    forget: () => log.push('forget'),
    remind: () => { log.push('remind'); note('remind') },
    idle: () => { log.push('idle'); note('idle') },
    quiet: () => { log.push('quiet'); note('quiet') },
    said: (content) => log.push(`said:${content}`),
    timed: (timing) => timed.push(timing),
    interrupted: () => { timed.at(-1)!.interrupted = true }
  }
  const core = new TurnCore({
    clock,
    sensitivity: 0.5,
    language: 'en-US',
    responsiveness: 0.5,
    words: true,
    providerTurns: false,
    early: true,
    detector,
    idle: { reminderMs: 10_000, reminders: 1, timeoutMs: 30_000 },
    ...options
  }, calls)
  /** The agent says `frames` frames of audio (one utterance, all given at once). */
  const agentSays = (frames: number, text = 'Welcome.') => {
    core.respond()
    for (let i = 1; i <= frames; i++) core.audio(frame(i))
    core.text(text)
    core.done(text)
  }
  const has = (entry: string) => log.includes(entry)
  return { clock, core, log, sent, timed, detector, agentSays, has, at }
}

t.test('a finished sentence ends the turn after a short silence; an unfinished one waits, and a caller who goes on is one turn', async (t) => {
  const { clock, core, log, has, detector } = setup()
  core.speech('start', 0)
  clock.advance(1500)
  core.words('I would like to book a table for', true)
  core.speech('end', 1500)
  t.ok(detector.quick, 'the detector takes the first window of speech while the turn may go on')
  clock.advance(1000)
  t.notOk(has('answer'), 'a trailing preposition waits past a pause of 1 s')
  core.speech('start', clock.now())
  t.notOk(detector.quick)
  clock.advance(1200)
  core.words('I would like to book a table for four people on Friday.', true)
  core.speech('end', clock.now())
  clock.advance(150)
  t.notOk(has('answer'), 'not before the short silence has passed')
  clock.advance(60)
  t.equal(log.filter((e) => e === 'answer').length, 1, 'one answer for the one utterance')
  t.ok(core.speaking, 'the agent answers')
  t.ok(has('prepare:I would like to book a table for four people on Friday.'), 'the stable words were answered early')
})

t.test('without words (no streaming recogniser) silence alone ends the turn (500 ms at the default)', async (t) => {
  const { clock, core, has } = setup({ words: false, early: false })
  core.speech('start', 0)
  clock.advance(800)
  core.speech('end', 800)
  clock.advance(490)
  t.notOk(has('answer'))
  clock.advance(20)
  t.ok(has('answer'))
})

t.test('a backchannel over the agent pauses it; it resumes where it paused and the backchannel is forgotten', async (t) => {
  const { clock, core, log, sent, has, agentSays } = setup()
  agentSays(100)
  clock.advance(400)
  const before = sent.length
  t.ok(before > 10 && before < 30, `the agent plays in real time (${before} frames sent)`)
  core.speech('start', clock.now())
  clock.advance(100)
  core.words('uh-huh', false)
  clock.advance(300)
  t.ok(sent.length <= before + 1, `paused: nothing more goes out while the caller may be interrupting (${sent.length - before} more)`)
  core.speech('end', clock.now())
  clock.advance(RESUME_AFTER_MS + 20)
  t.ok(has('forget'), 'the backchannel is not part of the next turn')
  clock.advance(200)
  t.ok(sent.length > before + 5, 'the agent goes on')
  t.same(sent, sent.map((_, i) => i + 1), 'from where it paused: every frame once, in order')
  t.notOk(has('cancel:0') || log.some((e) => e.startsWith('cancel')), 'no barge-in')
  t.notOk(has('clear'))
  t.notOk(has('answer'), 'a backchannel is no turn')
})

t.test('words that are not a backchannel make the pause a barge-in: cancelled with what was heard, the far end cleared', async (t) => {
  const { clock, core, log, has, agentSays } = setup()
  agentSays(100, 'Our opening hours are long.')
  clock.advance(500)
  core.speech('start', clock.now())
  clock.advance(200)
  core.words('wait I', false)
  const cancel = log.find((e) => e.startsWith('cancel:'))
  t.ok(cancel !== undefined, 'barge-in on the words')
  const heard = Number(cancel!.split(':')[1])
  t.ok(heard >= 480 && heard <= 560, `heard ${heard} ms: what went out before the pause`)
  t.ok(has('clear'))
  t.notOk(core.speaking)
  clock.advance(800)
  core.words('wait I have a question.', true)
  core.speech('end', clock.now())
  clock.advance(250)
  t.ok(has('answer'), 'the interruption is the caller\'s turn')
})

t.test('without words, speech over the agent is a barge-in once long enough for the sensitivity; shorter, the agent resumes', async (t) => {
  t.equal(confirmMs(0.5), 800)
  t.ok(confirmMs(1) < confirmMs(0.5) && confirmMs(0.5) < confirmMs(0.1))
  const short = setup({ words: false, early: false })
  short.agentSays(200)
  short.clock.advance(300)
  short.core.speech('start', short.clock.now())
  short.clock.advance(300)
  short.core.speech('end', short.clock.now())
  short.clock.advance(600)
  t.notOk(short.log.some((e) => e.startsWith('cancel')), '300 ms: a cough, the agent resumes')
  t.ok(short.has('forget'))

  const long = setup({ words: false, early: false })
  long.agentSays(200)
  long.clock.advance(300)
  long.core.speech('start', long.clock.now())
  long.clock.advance(300)
  // Short gaps between words do not end the pause: the speech adds up.
  long.core.speech('end', long.clock.now())
  long.clock.advance(100)
  long.core.speech('start', long.clock.now())
  long.clock.advance(490)
  t.notOk(long.log.some((e) => e.startsWith('cancel')), '790 ms of speech: not yet')
  long.clock.advance(20)
  t.ok(long.log.some((e) => e.startsWith('cancel')), 'over 800 ms of speech: a barge-in')
})

t.test('with words expected, speech that brings none (music, a fan) is noise: the agent resumes, and later words still interrupt', async (t) => {
  const { clock, core, sent, log, agentSays } = setup()
  agentSays(200)
  clock.advance(300)
  core.speech('start', clock.now())
  clock.advance(NO_WORDS_MS - 20)
  const held = sent.length
  clock.advance(40 + 200)
  t.ok(sent.length > held + 5, 'resumed while the noise goes on')
  t.notOk(log.some((e) => e.startsWith('cancel')))
  core.words('excuse me', false)
  t.ok(log.some((e) => e.startsWith('cancel')), 'words over the resumed agent interrupt it')
})

t.test('the caller cannot interrupt at sensitivity 0: their speech is a turn answered after the agent', async (t) => {
  const { clock, core, log, sent, agentSays } = setup({ sensitivity: 0 })
  agentSays(50)
  clock.advance(200)
  core.speech('start', clock.now())
  core.words('hello there.', true)
  core.speech('end', clock.now() + 300)
  clock.advance(1500)
  t.notOk(log.some((e) => e.startsWith('cancel')))
  t.equal(sent.length, 50, 'the agent said all of it')
})

t.test('the sensitivity may change mid-call (a workflow step\'s own): from 0 the caller can interrupt, and a higher one confirms sooner', async (t) => {
  const { clock, core, log, agentSays } = setup({ sensitivity: 0, words: false, early: false })
  agentSays(200)
  clock.advance(200)
  core.speech('start', clock.now())
  clock.advance(1500)
  core.speech('end', clock.now())
  t.notOk(log.some((e) => e.startsWith('cancel')), 'at 0 the agent is not interrupted')
  clock.advance(5000)
  core.setSensitivity(1)
  agentSays(200)
  clock.advance(200)
  core.speech('start', clock.now())
  clock.advance(confirmMs(1) + 20)
  t.ok(log.some((e) => e.startsWith('cancel')), `at 1 speech over the agent is a barge-in after ${confirmMs(1)} ms, not ${confirmMs(0.5)}`)
})

t.test('reminders: after the agent stops, silence brings a reminder, then the time-out; speech starts them over', async (t) => {
  const { clock, core, log, agentSays, at } = setup()
  agentSays(10)
  clock.advance(20_000)
  t.equal(at.remind[0] - at.quiet[0], 10_000, 'a reminder 10 s after the agent stopped')
  agentSays(10, 'Are you still there?')
  clock.advance(29_000)
  t.notOk(log.includes('idle'), 'no reminder left: the time-out runs')
  core.speech('start', clock.now())
  clock.advance(60_000)
  t.notOk(log.includes('idle'), 'no time-out while the caller speaks')
  core.speech('end', clock.now())
  clock.advance(600)
  t.equal(log.filter((e) => e === 'answer').length, 1, 'the turn ended')
  // Nothing was recognised: no answer comes, and the agent is not speaking.
  core.recognised('')
  t.notOk(core.speaking)
  clock.advance(10_100)
  t.equal(log.filter((e) => e === 'remind').length, 2, 'the reminders started over')
  agentSays(10, 'Are you still there?')
  clock.advance(30_300)
  t.ok(log.includes('idle'), 'then the time-out')
  t.equal(at.idle[0] - at.quiet.at(-1)!, 30_000)
})

t.test('every answered turn is timed: end of turn, each stage, and what the caller waited', async (t) => {
  const { clock, core, timed } = setup()
  core.speech('start', 0)
  clock.advance(1000)
  core.words('What time is it?', true)
  core.speech('end', 1000)
  clock.advance(200)
  clock.advance(150)
  core.stages({ transcriptionMs: 40, llmMs: 80, ttsMs: 30 })
  core.audio(frame(1))
  core.done('It is noon.')
  t.equal(timed.length, 1)
  t.same(timed[0], { at: 1_001_000, end_of_turn_ms: 200, transcription_ms: 40, llm_ms: 80, tts_ms: 30, e2e_ms: 350 })
  // The begin message and reminders answer no turn: they are not timed.
  core.respond()
  core.audio(frame(2))
  core.done('Hello.')
  clock.advance(100)
  t.equal(timed.length, 1)
  t.notOk('interrupted' in timed[0], 'heard out')
})

t.test('an answer the caller cuts off is marked interrupted; one cancelled before any of it went out is not', async (t) => {
  const { clock, core, timed } = setup({ words: false, early: false })
  const turn = (text: string) => {
    core.speech('start', clock.now())
    clock.advance(800)
    core.speech('end', clock.now())
    clock.advance(600)
    core.recognised(text)
  }
  turn('Tell me everything.')
  for (let i = 1; i <= 100; i++) core.audio(frame(i))
  core.done('A long answer.')
  clock.advance(400)
  t.equal(timed.length, 1)
  // The caller talks over it past the confirmation: a barge-in.
  core.speech('start', clock.now())
  clock.advance(confirmMs(0.5) + 20)
  t.same(timed.map((timing) => timing.interrupted), [true], 'the answer was cut off')
  core.speech('end', clock.now())
  clock.advance(600)
  core.recognised('Stop.')
  // Its answer is heard out.
  for (let i = 1; i <= 5; i++) core.audio(frame(i))
  core.done('Stopped.')
  clock.advance(400)
  t.same(timed.map((timing) => timing.interrupted), [true, undefined], 'the next answer was heard out')
})

t.test('a typed turn at a time: the next is refused until the answer has played', async (t) => {
  const { clock, core } = setup()
  t.ok(core.typed())
  core.respond()
  t.notOk(core.typed(), 'refused while answering')
  core.audio(frame(1))
  core.done('Sure.')
  clock.advance(200)
  t.ok(core.typed())
})

t.test('a stopped core fires no timer', async (t) => {
  const { clock, core, log } = setup()
  core.speech('start', 0)
  core.words('hello.', true)
  core.speech('end', 100)
  core.stop()
  clock.advance(60_000)
  t.notOk(log.includes('answer') || log.includes('remind') || log.includes('idle'))
})

t.test('final words and then none end the caller\'s speech though the detector still hears speech (babble behind them)', async (t) => {
  const { clock, core, has } = setup()
  core.speech('start', 0)
  clock.advance(1500)
  core.words('four people', false)
  clock.advance(300)
  core.words('four people on Friday.', true)
  clock.advance(WORDS_QUIET_MS + 190)
  t.notOk(has('answer'), 'the caller may go on')
  clock.advance(20)
  t.ok(has('answer'), 'no words came: the silence counts from then, and a finished sentence ends the turn')
  core.speech('end', clock.now())
  t.equal(core.recognised('four people on Friday.'), 1_000_000, 'one turn, from the speech\'s start')
})

t.test('words keep coming: the speech goes on', async (t) => {
  const { clock, core, has } = setup()
  core.speech('start', 0)
  core.words('my number is', true)
  clock.advance(WORDS_QUIET_MS - 100)
  core.words('my number is five five five', false)
  clock.advance(WORDS_QUIET_MS * 3)
  t.notOk(has('answer'), 'interim words: not final, and the detector hears the caller')
})

t.test('words of a turn being recognised after its end (a recogniser that transcribes on commit) reach the browser and decide nothing', async (t) => {
  const { clock, core, log } = setup()
  core.speech('start', 0)
  core.speech('end', 800)
  clock.advance(1400)
  t.equal(log.filter((e) => e === 'answer').length, 1, 'silence alone ended it')
  core.words('I would like', false)
  core.words('I would like an appointment on Tuesday.', true)
  clock.advance(3000)
  t.equal(log.filter((e) => e === 'answer').length, 1, 'no second answer')
  t.notOk(log.some((e) => e.startsWith('prepare')), 'no early reply after the end of turn')
  t.equal(core.recognised('I would like an appointment on Tuesday.'), 1_000_000)
})

t.test('a caller who goes on while the answer is prepared: the turns join, and the joined turn keeps the first one\'s start', async (t) => {
  const { clock, core, log } = setup({ words: false, early: false })
  core.speech('start', 0)
  core.speech('end', 1000)
  clock.advance(1600)
  t.ok(log.includes('answer'))
  core.speech('start', clock.now())
  t.ok(log.some((e) => e.startsWith('cancel')), 'the answer not yet audible is stopped')
  clock.advance(500)
  core.speech('end', clock.now())
  clock.advance(600)
  t.equal(log.filter((e) => e === 'answer').length, 2)
  t.equal(core.recognised('my number is five five five one two three.'), 1_000_000, 'one turn from the first part\'s start')
})

t.test('new words after the silence began move it: the caller went on though the detector did not hear them start', async (t) => {
  const { clock, core, has } = setup()
  core.speech('start', 0)
  clock.advance(1500)
  core.words('my number is five five five', true)
  clock.advance(WORDS_QUIET_MS + 10)
  t.notOk(has('answer'), 'an unfinished number waits')
  clock.advance(300)
  core.words('my number is five five five one', false)
  clock.advance(900)
  t.notOk(has('answer'), 'the silence is counted from the new words')
  core.words('my number is five five five one two three four.', true)
  clock.advance(250)
  t.ok(has('answer'))
})
