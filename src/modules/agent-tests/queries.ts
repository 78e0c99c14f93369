import { sql, type Selectable, type Transaction } from 'kysely'
import { inOneSnapshot, type DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import type { AgentTestResultsTable, AgentTestRunsTable, AgentTestsTable, Database } from '../../db/schema.ts'

// The SQL of agent tests: scenarios, runs and their results (migration 0033). Every query is scoped by the account.

type Trx = Transaction<Database>
export type ScenarioRow = Selectable<AgentTestsTable>
export type RunRow = Selectable<AgentTestRunsTable>
export type ResultRow = Selectable<AgentTestResultsTable>

export interface ScenarioValues {
  name: string
  caller: object
  mocks: Array<{ tool: string, output: string }>
  expectations: object[]
  dynamic_context: Record<string, unknown>
}

const json = (value: unknown) => JSON.stringify(value)

const columns = (values: Partial<ScenarioValues>) => ({
  ...(values.name === undefined ? {} : { name: values.name }),
  ...(values.caller === undefined ? {} : { caller: json(values.caller) }),
  ...(values.mocks === undefined ? {} : { mocks: json(values.mocks) }),
  ...(values.expectations === undefined ? {} : { expectations: json(values.expectations) }),
  ...(values.dynamic_context === undefined ? {} : { dynamic_context: json(values.dynamic_context) })
})

export async function listScenarioRows (db: DB, userId: string, agentId: string, ids?: string[]): Promise<ScenarioRow[]> {
  let query = db.selectFrom('agent_tests').selectAll().where('user_id', '=', userId).where('agent_id', '=', agentId)
  if (ids !== undefined) query = query.where('id', 'in', ids)
  return await query.orderBy('created_at').orderBy('id').execute()
}

export async function findScenarioRow (db: DB, userId: string, agentId: string, id: string): Promise<ScenarioRow | undefined> {
  return await db.selectFrom('agent_tests').selectAll().where('user_id', '=', userId).where('agent_id', '=', agentId).where('id', '=', id).executeTakeFirst()
}

/** Under the agent's row lock (the caller's transaction), so that concurrent creations cannot pass the cap together. */
export async function countScenarios (trx: Trx, userId: string, agentId: string): Promise<number> {
  const row = await trx.selectFrom('agent_tests').select((eb) => eb.fn.countAll<number>().as('n')).where('user_id', '=', userId).where('agent_id', '=', agentId).executeTakeFirstOrThrow()
  return Number(row.n)
}

export async function insertScenario (trx: Trx, userId: string, agentId: string, values: ScenarioValues): Promise<ScenarioRow> {
  return await trx.insertInto('agent_tests').values({ id: newId(), user_id: userId, agent_id: agentId, ...columns(values) } as never)
    .returningAll().executeTakeFirstOrThrow()
}

export async function updateScenarioRow (db: DB, userId: string, agentId: string, id: string, values: Partial<ScenarioValues>): Promise<ScenarioRow | undefined> {
  return await db.updateTable('agent_tests').set({ ...columns(values), updated_at: new Date() })
    .where('user_id', '=', userId).where('agent_id', '=', agentId).where('id', '=', id).returningAll().executeTakeFirst()
}

export async function deleteScenarioRow (db: DB, userId: string, agentId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom('agent_tests').where('user_id', '=', userId).where('agent_id', '=', agentId).where('id', '=', id).executeTakeFirst()
  return result.numDeletedRows > 0n
}

// Runs

/**
 * Writes a run as running unless the account has `maxRunning` runs going already (then undefined). The user's row
 * lock orders concurrent starts, so the count and the insert are one step. A run left running by a process that
 * died stops counting after `staleMs`.
 */
export async function reserveRun (db: DB, userId: string, values: { agent_id: string, agent_version: number, engine: 'text' | 'simulator' }, maxRunning: number, staleMs: number): Promise<RunRow | undefined> {
  return await db.transaction().execute(async (trx) => {
    await trx.selectFrom('users').select('id').where('id', '=', userId).forUpdate().executeTakeFirst()
    const { n } = await trx.selectFrom('agent_test_runs').select((eb) => eb.fn.countAll<number>().as('n'))
      .where('user_id', '=', userId).where('status', '=', 'running')
      .where('started_at', '>', sql<Date>`now() - make_interval(secs => ${staleMs / 1000})`).executeTakeFirstOrThrow()
    if (Number(n) >= maxRunning) return undefined
    return await trx.insertInto('agent_test_runs').values({ id: newId(), user_id: userId, ...values }).returningAll().executeTakeFirstOrThrow()
  })
}

export type ResultValues = Omit<ResultRow, 'run_id' | 'position' | 'expectations' | 'transcript' | 'answer_ms'> & { expectations: object[], transcript: object[], answer_ms: number[] }

/** Stores the results and completes the run. */
export async function finishRun (db: DB, runId: string, results: ResultValues[], durationMs: number): Promise<RunRow> {
  return await db.transaction().execute(async (trx) => {
    if (results.length > 0) {
      await trx.insertInto('agent_test_results').values(results.map((result, position) => ({
        ...result,
        run_id: runId,
        position,
        expectations: json(result.expectations),
        transcript: json(result.transcript),
        answer_ms: json(result.answer_ms)
      }))).execute()
    }
    const passed = results.filter((result) => result.status === 'passed').length
    return await trx.updateTable('agent_test_runs')
      .set({ status: passed === results.length ? 'passed' : 'failed', passed, failed: results.length - passed, duration_ms: durationMs })
      .where('id', '=', runId).returningAll().executeTakeFirstOrThrow()
  })
}

/** A run that failed before its results (the process's error): it no longer counts as running. */
export async function dropRun (db: DB, runId: string): Promise<void> {
  await db.deleteFrom('agent_test_runs').where('id', '=', runId).execute()
}

/** Finished runs, newest first; `version`: of that agent version only. */
export async function listRunRows (db: DB, userId: string, agentId: string, page: { limit: number, offset: number, version?: number }): Promise<{ rows: RunRow[], total: number }> {
  return await inOneSnapshot(db, async (snapshot) => {
    let base = snapshot.selectFrom('agent_test_runs').where('user_id', '=', userId).where('agent_id', '=', agentId).where('status', '!=', 'running')
    if (page.version !== undefined) base = base.where('agent_version', '=', page.version)
    const rows = await base.selectAll().orderBy('started_at', 'desc').orderBy('id', 'desc').limit(page.limit).offset(page.offset).execute()
    const count = await base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()
    return { rows, total: Number(count.n) }
  })
}

export async function findRunRow (db: DB, userId: string, agentId: string, id: string): Promise<RunRow | undefined> {
  return await db.selectFrom('agent_test_runs').selectAll().where('user_id', '=', userId).where('agent_id', '=', agentId).where('id', '=', id)
    .where('status', '!=', 'running').executeTakeFirst()
}

export async function resultsOf (db: DB, runId: string): Promise<ResultRow[]> {
  return await db.selectFrom('agent_test_results').selectAll().where('run_id', '=', runId).orderBy('position').execute()
}

/** The account an agent belongs to (the CLI runs an agent's tests by its id alone). */
export async function agentOwner (db: DB, agentId: string): Promise<string | undefined> {
  return (await db.selectFrom('agents').select('user_id').where('id', '=', agentId).executeTakeFirst())?.user_id
}
