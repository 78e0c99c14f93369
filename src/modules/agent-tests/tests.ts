import { performance } from 'node:perf_hooks'
import type { DB } from '../../db/database.ts'
import type { Conversation } from '../../db/shapes.ts'
import { badRequest, conflict, HttpError, notFound } from '../../http/errors.ts'
import { agentExists, lockAgent } from '../agents/queries.ts'
import { loadAgentConfig } from '../agents/versions.ts'
import { textEngine } from '../voice/engines/index.ts'
import type { SessionDeps } from '../voice/session.ts'
import { TextConversation } from '../voice/text-run.ts'
import { personaLine } from './caller.ts'
import { check, stepsEntered, toolItems } from './expect.ts'
import { judge } from './judge.ts'
import {
  countScenarios, deleteScenarioRow, dropRun, findRunRow, findScenarioRow, finishRun, insertScenario, listRunRows, listScenarioRows, reserveRun,
  resultsOf, updateScenarioRow, type ResultRow, type ResultValues, type RunRow, type ScenarioRow
} from './queries.ts'
import {
  MAX_EXPECTATIONS, MAX_LINE_CHARS, MAX_SCENARIOS, MAX_SCRIPT_LINES, type Expectation, type ExpectationResult, type Scenario, type ScenarioInput,
  type ScenarioPatch, type ScenarioResult, type TestRun, type TestRunSummary
} from './shapes.ts'

// An agent's tests (docs/testing.md): scenarios kept per agent, run against a version, results stored per run.
export * from './shapes.ts'

export interface RunOptions {
  /** Scenarios to run (default: all of the agent's), in the order given. */
  testIds?: string[]
  /** null or absent: the latest version. */
  version?: number | null
}

/** Runs one account may have going at once: each holds conversations (and model requests) for its whole length. */
export const MAX_RUNNING = 2
/** A run still marked running after this long was lost with its process: it no longer counts against the account. */
const STALE_RUN_MS = 30 * 60_000
/** Scenarios of one run that talk at once: they wait mostly on the model, and a run answers within one request. */
const SCENARIOS_AT_ONCE = 4

// Scenarios

const toScenario = (row: ScenarioRow): Scenario => ({
  _id: row.id,
  agent_id: row.agent_id,
  name: row.name,
  caller: row.caller as Scenario['caller'],
  mocks: row.mocks,
  expectations: row.expectations as Expectation[],
  dynamic_context: row.dynamic_context,
  created_at: row.created_at.getTime(),
  updated_at: row.updated_at.getTime()
})

async function requireAgent (db: DB, userId: string, agentId: string): Promise<void> {
  if (!await agentExists(db, userId, agentId)) throw notFound(`agent ${agentId}`)
}

/** The agent's scenarios, oldest first. 404 when the agent is not the account's. */
export async function listScenarios (db: DB, userId: string, agentId: string): Promise<Scenario[]> {
  await requireAgent(db, userId, agentId)
  return (await listScenarioRows(db, userId, agentId)).map(toScenario)
}

export async function findScenario (db: DB, userId: string, agentId: string, testId: string): Promise<Scenario | undefined> {
  const row = await findScenarioRow(db, userId, agentId, testId)
  return row === undefined ? undefined : toScenario(row)
}

/** 404 when the agent is not the account's, 409 `test_limit_reached` past MAX_SCENARIOS (counted under the agent's row lock). */
export async function createScenario (db: DB, userId: string, agentId: string, input: ScenarioInput): Promise<Scenario> {
  return await db.transaction().execute(async (trx) => {
    if (await lockAgent(trx, userId, agentId) === undefined) throw notFound(`agent ${agentId}`)
    if (await countScenarios(trx, userId, agentId) >= MAX_SCENARIOS) throw conflict(`an agent holds at most ${MAX_SCENARIOS} tests`, 'test_limit_reached')
    return toScenario(await insertScenario(trx, userId, agentId, { mocks: [], dynamic_context: {}, ...input }))
  })
}

export async function updateScenario (db: DB, userId: string, agentId: string, testId: string, patch: ScenarioPatch): Promise<Scenario | undefined> {
  const row = await updateScenarioRow(db, userId, agentId, testId, patch)
  return row === undefined ? undefined : toScenario(row)
}

/** false: there was no such scenario. */
export async function deleteScenario (db: DB, userId: string, agentId: string, testId: string): Promise<boolean> {
  return await deleteScenarioRow(db, userId, agentId, testId)
}

/**
 * A test chat kept as a scenario: the caller's lines as a script, and expectations from what happened — each tool
 * called (by name; arguments vary between runs of a model), the workflow steps entered, the variables collected, and
 * how it ended when it did (`endReason`, the test chat's `end_reason`). 400 when the caller said nothing.
 */
export function scenarioFromChat (conversation: Conversation, options: { name?: string, endReason?: string | null } = {}): ScenarioInput {
  const lines = conversation.transcript.filter((item) => item.speaker === 'user' && item.content.trim() !== '').map((item) => item.content.trim().slice(0, MAX_LINE_CHARS))
  if (lines.length === 0) throw badRequest('the conversation has no caller line to keep as a test')
  if (lines.length > MAX_SCRIPT_LINES) throw badRequest(`a test replays at most ${MAX_SCRIPT_LINES} caller lines; this conversation has ${lines.length}`)
  const expectations: Expectation[] = [...new Set(toolItems(conversation.transcript).map((tool) => tool.name))].map((tool) => ({ type: 'tool_called', tool }))
  const steps = stepsEntered(conversation).map((step) => step.id)
  if (steps.length > 0) expectations.push({ type: 'step_path', steps: steps.slice(0, 50) })
  for (const [name, value] of Object.entries(conversation.workflow?.variables ?? {})) expectations.push({ type: 'variable', name, value })
  if (options.endReason != null) expectations.push({ type: 'ended', reason: options.endReason })
  // Nothing observable happened: the agent's last answer stands for it.
  const last = conversation.transcript.findLast((item) => item.speaker === 'agent' && item.content.trim() !== '')
  if (expectations.length === 0 && last !== undefined) expectations.push({ type: 'transcript_contains', text: last.content.trim().slice(0, 500) })
  if (expectations.length === 0) throw badRequest('the conversation has nothing to expect: no tool, step, end or agent answer')
  const first = lines[0].length > 60 ? `${lines[0].slice(0, 59)}…` : lines[0]
  return {
    name: options.name ?? `Chat: ${first}`,
    caller: { type: 'script', lines },
    mocks: [],
    expectations: expectations.slice(0, MAX_EXPECTATIONS),
    dynamic_context: {}
  }
}

// Runs

export { agentOwner } from './queries.ts'

/** A run as lines of text: one per scenario and one per expectation (the CLI prints it). */
export function runReport (run: TestRun): string {
  const lines = [`agent ${run.agent_id} version ${run.agent_version} (${run.engine}): ${run.results.length} test${run.results.length === 1 ? '' : 's'}`]
  for (const result of run.results) {
    lines.push(`${result.status === 'passed' ? 'pass ' : result.status === 'error' ? 'ERROR' : 'FAIL '} ${result.scenario_name} (${result.scenario_id}; ${result.caller_turns} caller turn${result.caller_turns === 1 ? '' : 's'}, ${result.duration_ms} ms${result.end_reason === null ? '' : `, ended ${result.end_reason}`})`)
    if (result.error !== null) lines.push(`        error: ${result.error}`)
    for (const { expectation, status, reason } of result.expectations) {
      const { type, ...what } = expectation
      lines.push(`  ${status === 'passed' ? 'passed    ' : status === 'failed' ? 'FAILED    ' : 'NOT JUDGED'} ${type} ${JSON.stringify(what)}: ${reason}`)
    }
  }
  lines.push(`${run.passed} passed, ${run.failed} failed (run ${run._id}, ${run.duration_ms} ms)`)
  return lines.join('\n')
}

const toSummary = (row: RunRow): TestRunSummary => ({
  _id: row.id,
  agent_id: row.agent_id,
  agent_version: row.agent_version,
  engine: row.engine,
  status: row.status === 'passed' ? 'passed' : 'failed',
  passed: row.passed,
  failed: row.failed,
  started_at: row.started_at.getTime(),
  duration_ms: row.duration_ms ?? 0
})

const toResult = (row: ResultRow): ScenarioResult => ({
  scenario_id: row.scenario_id,
  scenario_name: row.scenario_name,
  status: row.status,
  expectations: row.expectations as ExpectationResult[],
  transcript: row.transcript,
  end_reason: row.end_reason,
  caller_turns: row.caller_turns,
  answer_ms: row.answer_ms,
  duration_ms: row.duration_ms,
  error: row.error
})

/** Newest first, without their results. 404 when the agent is not the account's. */
export async function listRuns (db: DB, userId: string, agentId: string, paging: { limit: number, offset: number }): Promise<{ data: TestRunSummary[], total: number }> {
  await requireAgent(db, userId, agentId)
  const { rows, total } = await listRunRows(db, userId, agentId, paging)
  return { data: rows.map(toSummary), total }
}

export async function findRun (db: DB, userId: string, agentId: string, runId: string): Promise<TestRun | undefined> {
  const row = await findRunRow(db, userId, agentId, runId)
  return row === undefined ? undefined : { ...toSummary(row), results: (await resultsOf(db, row.id)).map(toResult) }
}

const message = (error: unknown) => error instanceof Error ? error.message : String(error)

/** One scenario through the conversation core: the caller talks until its lines or turns run out or the conversation ends, then the expectations are checked. */
async function runScenario (deps: SessionDeps, userId: string, agentId: string, version: number, model: string, scenario: Scenario): Promise<ResultValues> {
  const started = performance.now()
  const mocks = Object.fromEntries(scenario.mocks.map((mock) => [mock.tool, mock.output]))
  let conversation: TextConversation | undefined
  let error: string | null = null
  let callerTurns = 0
  // Read before close(), which ends a conversation still going as the caller hanging up.
  let endReason: string | null = null
  let transcript: Conversation = { agent_id: agentId, transcript: [], tokens: {}, speech: { recognised: 0, synthesised: 0 }, transfers: [], recording_ms: 0 }
  try {
    conversation = await TextConversation.open(deps, { userId, agentId, version, mocks, dynamicContext: scenario.dynamic_context })
    const caller = scenario.caller
    if (caller.type === 'persona' && conversation.engine !== 'text') throw new Error('a persona caller needs the LLM (LLM_URL) to play it; without one only scripted callers run')
    const turns = caller.type === 'script' ? caller.lines.length : caller.max_turns
    const signal = AbortSignal.timeout(deps.config.voice.providerTimeoutMs * (turns + 1))
    for (let turn = 0; turn < turns && !conversation.ended; turn++) {
      const line = caller.type === 'script' ? caller.lines[turn] : await personaLine(deps.config.voice, model, caller.persona, conversation.conversation().transcript, signal)
      if (line === null) break
      await conversation.say(line)
      callerTurns++
    }
    transcript = conversation.conversation()
    endReason = conversation.endReason
    if (endReason === 'runtime_error') error = 'the agent failed during the conversation (its model or a tool): runtime_error'
  } catch (failure) {
    // An HTTP error (a version that vanished) is the run's, not the scenario's.
    if (failure instanceof HttpError) throw failure
    error = message(failure)
    if (conversation !== undefined) {
      transcript = conversation.conversation()
      endReason = conversation.endReason
    }
  } finally {
    await conversation?.close()
  }
  const criteria = scenario.expectations.flatMap((expectation) => expectation.type === 'criterion' ? [expectation] : [])
  const verdicts = error === null ? await judge(deps.config.analyser, transcript.transcript, criteria.map((c) => c.criterion)) : []
  const results = scenario.expectations.map((expectation) => {
    if (expectation.type !== 'criterion') return check(expectation, transcript, endReason)
    const verdict = verdicts[criteria.indexOf(expectation)] ?? { status: 'not_judged', reason: 'the conversation did not run' }
    return { expectation, ...verdict }
  })
  return {
    scenario_id: scenario._id,
    scenario_name: scenario.name,
    status: error !== null ? 'error' : results.every((r) => r.status === 'passed') ? 'passed' : 'failed',
    expectations: results,
    transcript: transcript.transcript,
    end_reason: endReason,
    caller_turns: callerTurns,
    answer_ms: conversation?.answerTimes ?? [],
    duration_ms: Math.round(performance.now() - started),
    error
  }
}

/**
 * Runs the scenarios against the version (default: the latest) and answers the stored run (docs/testing.md, "Runs").
 * Synchronous: a suite (at most MAX_SCENARIOS) runs within the request, SCENARIOS_AT_ONCE at a time, each in its own
 * TextConversation. 404 for an agent, version or test that is not the account's; 400 `bad_request` with no test to
 * run; 409 `test_run_busy` while the account has MAX_RUNNING runs going.
 */
export async function runTests (deps: SessionDeps, userId: string, agentId: string, options: RunOptions): Promise<TestRun> {
  const { db } = deps
  const config = await loadAgentConfig(db, userId, agentId, options.version ?? null)
  if (config === undefined) throw notFound(options.version == null ? `agent ${agentId}` : `version ${options.version} of agent ${agentId}`)
  const ids = options.testIds === undefined ? undefined : [...new Set(options.testIds.map((id) => id.toLowerCase()))]
  const rows = await listScenarioRows(db, userId, agentId, ids)
  if (ids !== undefined) {
    const missing = ids.find((id) => !rows.some((row) => row.id === id))
    if (missing !== undefined) throw notFound(`test ${missing}`)
    rows.sort((a, b) => ids.indexOf(a.id) - ids.indexOf(b.id))
  }
  if (rows.length === 0) throw badRequest('the agent has no test to run')
  const engine = textEngine(deps.config.voice) === 'text' ? 'text' : 'simulator'
  const run = await reserveRun(db, userId, { agent_id: agentId, agent_version: config.version, engine }, MAX_RUNNING, STALE_RUN_MS)
  if (run === undefined) throw new HttpError(409, 'test_run_busy', `at most ${MAX_RUNNING} test runs of an account run at once; try again when one has finished`)
  const started = performance.now()
  try {
    const scenarios = rows.map(toScenario)
    const results: ResultValues[] = new Array(scenarios.length)
    let next = 0
    const worker = async () => {
      for (let i = next++; i < scenarios.length; i = next++) results[i] = await runScenario(deps, userId, agentId, config.version, config.llm.model, scenarios[i])
    }
    await Promise.all(Array.from({ length: Math.min(SCENARIOS_AT_ONCE, scenarios.length) }, worker))
    const finished = await finishRun(db, run.id, results, Math.round(performance.now() - started))
    return { ...toSummary(finished), results: (await resultsOf(db, run.id)).map(toResult) }
  } catch (error) {
    await dropRun(db, run.id)
    throw error
  }
}
