import type { DB } from '../../db/database.ts'
import type { Conversation } from '../../db/shapes.ts'
import type { SessionDeps } from '../voice/session.ts'
import type { Scenario, ScenarioInput, ScenarioPatch, TestRun, TestRunSummary } from './shapes.ts'

// An agent's tests (docs/testing.md): scenarios kept per agent, run against a version, results stored per run.
export * from './shapes.ts'

export interface RunOptions {
  /** Scenarios to run (default: all of the agent's), in the order given. */
  testIds?: string[]
  /** null or absent: the latest version. */
  version?: number | null
}

/** The caller's lines as a script, expectations from what happened (tools called, steps entered, how it ended). */
export function scenarioFromChat (_conversation: Conversation, _name?: string): ScenarioInput {
  throw new Error('not yet')
}

export async function listScenarios (_db: DB, _userId: string, _agentId: string): Promise<Scenario[]> { throw new Error('not yet') }
export async function findScenario (_db: DB, _userId: string, _agentId: string, _testId: string): Promise<Scenario | undefined> { throw new Error('not yet') }
/** 404 when the agent is not the account's, 409 `test_limit_reached` past MAX_SCENARIOS. */
export async function createScenario (_db: DB, _userId: string, _agentId: string, _input: ScenarioInput): Promise<Scenario> { throw new Error('not yet') }
export async function updateScenario (_db: DB, _userId: string, _agentId: string, _testId: string, _patch: ScenarioPatch): Promise<Scenario | undefined> { throw new Error('not yet') }
/** false: there was no such scenario. */
export async function deleteScenario (_db: DB, _userId: string, _agentId: string, _testId: string): Promise<boolean> { throw new Error('not yet') }

/** Runs the scenarios against the version, stores and answers the run. 404 agent/version/test, 409 test_run_busy, 400 no_tests. */
export async function runTests (_deps: SessionDeps, _userId: string, _agentId: string, _options: RunOptions): Promise<TestRun> { throw new Error('not yet') }
/** Newest first, without their results. */
export async function listRuns (_db: DB, _userId: string, _agentId: string, _paging: { limit: number, offset: number }): Promise<{ data: TestRunSummary[], total: number }> { throw new Error('not yet') }
export async function findRun (_db: DB, _userId: string, _agentId: string, _runId: string): Promise<TestRun | undefined> { throw new Error('not yet') }
