import { Type, type Static } from 'typebox'
import { TranscriptItem, VariableValue } from '../../db/shapes.ts'
import { COMPONENT, EpochMs, ObjectId } from '../../http/schemas.ts'
import { byType } from '../agents/workflow.ts'

// The shapes of an agent's tests (docs/testing.md): scenarios (a simulated caller, tool mocks, expectations),
// runs and their results. The API answers them as they are; the console renders them. Limits here are input
// limits: a scenario is stored as validated.

/** Scenarios one agent may hold: a suite runs synchronously within one request (docs/testing.md, "Runs"). */
export const MAX_SCENARIOS = 50
/** A caller line, as a typed turn of a call may be (voice's text_too_long). */
export const MAX_LINE_CHARS = 2000
export const MAX_SCRIPT_LINES = 30
export const MAX_PERSONA_TURNS = 20
export const MAX_MOCKS = 20
export const MAX_EXPECTATIONS = 30

const Text = (description: string, maxLength = 500) => Type.String({ minLength: 1, maxLength, description })

export const ScriptCaller = Type.Object({
  type: Type.Literal('script'),
  lines: Type.Array(Text('what the caller types, one turn', MAX_LINE_CHARS), { minItems: 1, maxItems: MAX_SCRIPT_LINES, description: 'said in turn, each after the agent has answered the last; the run stops after the last line or when the conversation ends' })
}, { [COMPONENT]: 'TestScriptCaller' })

export const PersonaCaller = Type.Object({
  type: Type.Literal('persona'),
  persona: Text('who the caller is and what they want, in plain language; an LLM plays them (the LLM of the voice engine, LLM_URL)', 4000),
  max_turns: Type.Integer({ minimum: 1, maximum: MAX_PERSONA_TURNS, default: 8, description: 'caller lines at most; the run stops then, or when the conversation ends, or when the persona hangs up' })
}, { [COMPONENT]: 'TestPersonaCaller' })

export const Caller = byType([ScriptCaller, PersonaCaller], { [COMPONENT]: 'TestCaller', description: 'the simulated caller: scripted lines or a persona played by an LLM' })
export type Caller = Static<typeof Caller>

export const ToolMock = Type.Object({
  tool: Type.String({ minLength: 1, maxLength: 64, description: 'the tool\'s function name (as the model calls it) or its capability id' }),
  output: Type.String({ maxLength: 10_000, description: 'what the tool answers the model instead of running (it does not run: no request leaves)' })
}, { [COMPONENT]: 'TestToolMock' })
export type ToolMock = Static<typeof ToolMock>

export const Expectation = byType([
  Type.Object({
    type: Type.Literal('tool_called'),
    tool: Type.String({ minLength: 1, maxLength: 64, description: 'the function name the model called' }),
    arguments: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'members the call\'s arguments must hold (a subset: other members may be there); strings compare case-insensitively, the rest exactly' }))
  }, { description: 'the agent called this tool (at least once; with `arguments`, at least once with those)' }),
  Type.Object({
    type: Type.Literal('variable'),
    name: Type.String({ minLength: 1, maxLength: 64 }),
    value: VariableValue
  }, { description: 'a variable collected (workflow variables, then data collected during the call) has this value; strings compare case-insensitively' }),
  Type.Object({
    type: Type.Literal('ended'),
    reason: Type.String({ minLength: 1, maxLength: 64, description: 'the end reason (agent_hangup, max_duration_reached …, as a call\'s disconnection_reason); `none`: the conversation did not end' })
  }, { description: 'how the conversation ended' }),
  Type.Object({ type: Type.Literal('transcript_contains'), text: Text('found in what the agent said (case-insensitive)') }),
  Type.Object({ type: Type.Literal('transcript_excludes'), text: Text('never found in what the agent said (case-insensitive)') }),
  Type.Object({
    type: Type.Literal('step_path'),
    steps: Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { minItems: 1, maxItems: 50, description: 'workflow step ids (or names) entered in this order; other steps may come between' })
  }),
  Type.Object({
    type: Type.Literal('criterion'),
    criterion: Text('a plain-language statement about the conversation ("the agent confirmed the date before booking"), judged by the analysis model', 1000)
  })
], { [COMPONENT]: 'TestExpectation' })
export type Expectation = Static<typeof Expectation>

const scenarioMembers = {
  name: Text('shown in lists and results', 200),
  caller: Caller,
  mocks: Type.Array(ToolMock, { maxItems: MAX_MOCKS, description: 'tools replaced by fixed answers; unmocked tools act for real' }),
  expectations: Type.Array(Expectation, { minItems: 1, maxItems: MAX_EXPECTATIONS }),
  dynamic_context: Type.Record(Type.String(), Type.Unknown(), { description: 'the {{variables}} of the conversation, as a call\'s dynamic_context' })
}

/** What a client sends to create a scenario (mocks and dynamic_context default to none). */
export const ScenarioInput = Type.Object({
  ...scenarioMembers,
  mocks: Type.Optional(scenarioMembers.mocks),
  dynamic_context: Type.Optional(scenarioMembers.dynamic_context)
}, { description: 'a test as a client writes it' })
export type ScenarioInput = Static<typeof ScenarioInput>

export const ScenarioPatch = Type.Partial(ScenarioInput)
export type ScenarioPatch = Static<typeof ScenarioPatch>

export const Scenario = Type.Object({
  _id: ObjectId,
  agent_id: ObjectId,
  ...scenarioMembers,
  created_at: EpochMs,
  updated_at: EpochMs
}, { [COMPONENT]: 'TestScenario' })
export type Scenario = Static<typeof Scenario>

export const ExpectationResult = Type.Object({
  expectation: Expectation,
  status: Type.Enum(['passed', 'failed', 'not_judged'], { description: 'not_judged: a criterion with no analysis model configured (ANALYSER=openai), or the judge failed; it does not pass' }),
  reason: Type.String({ description: 'why it passed or failed (the judge\'s reason for a criterion)' })
}, { [COMPONENT]: 'TestExpectationResult' })
export type ExpectationResult = Static<typeof ExpectationResult>

export const ScenarioResult = Type.Object({
  scenario_id: ObjectId,
  scenario_name: Type.String({ description: 'as it was when the run ran' }),
  status: Type.Enum(['passed', 'failed', 'error'], { description: 'passed: every expectation passed; error: the conversation could not run (`error` says why)' }),
  expectations: Type.Array(ExpectationResult),
  transcript: Type.Array(TranscriptItem),
  end_reason: Type.Union([Type.String(), Type.Null()], { description: 'null: the caller stopped before the conversation ended' }),
  caller_turns: Type.Integer({ description: 'lines the caller said' }),
  answer_ms: Type.Array(Type.Integer(), { description: 'ms the agent took to answer each caller line (model and tools)' }),
  duration_ms: Type.Integer({ description: 'the whole scenario: conversation, caller and judge' }),
  error: Type.Union([Type.String(), Type.Null()])
}, { [COMPONENT]: 'TestScenarioResult' })
export type ScenarioResult = Static<typeof ScenarioResult>

const runMembers = {
  _id: ObjectId,
  agent_id: ObjectId,
  agent_version: Type.Integer({ description: 'the agent version the scenarios ran against' }),
  engine: Type.Enum(['text', 'simulator'], { description: 'text: the agent\'s LLM (LLM_URL); simulator: no LLM configured' }),
  status: Type.Enum(['passed', 'failed'], { description: 'passed: every scenario passed' }),
  passed: Type.Integer({ description: 'scenarios passed' }),
  failed: Type.Integer({ description: 'scenarios failed or in error' }),
  started_at: EpochMs,
  duration_ms: Type.Integer()
}

export const TestRunSummary = Type.Object(runMembers, { [COMPONENT]: 'TestRunSummary' })
export type TestRunSummary = Static<typeof TestRunSummary>

export const TestRun = Type.Object({ ...runMembers, results: Type.Array(ScenarioResult, { description: 'one per scenario, in the order they ran' }) }, { [COMPONENT]: 'TestRun' })
export type TestRun = Static<typeof TestRun>
