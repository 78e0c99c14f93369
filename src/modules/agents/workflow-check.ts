import type { DB } from '../../db/database.ts'
import { E164_PATTERN, EMAIL_PATTERN } from '../../http/schemas.ts'
import { HttpError, notFound } from '../../http/errors.ts'
import { VARIABLE } from '../../templates.ts'
import { voiceExists } from '../account/queries.ts'
import { parseCondition } from './conditions.ts'
import { CALL_VARIABLES, dataRetrieval } from './data-retrieval.ts'
import { findAgent, listCapabilities, type AgentRow } from './queries.ts'
import { forgetStoredCredentials, headerProblem, maskSettings, movesOrigin, unmaskSettings } from './settings-parts.ts'
import type { ApiCallStep, Workflow, WorkflowStep } from './workflow.ts'

// What the workflow's schema cannot say (docs/workflows.md, "Validation"): the steps form a graph that a call can
// walk (one start that exists, unique ids, no dangling transitions, every step reachable, a way on from every action
// step, none out of a transfer or an end), its references are the account's (tools, agents, voices), its expressions
// parse and read variables something sets. Each refusal names the member as `body.workflow.steps[2].transitions[0].to`.
// Also the write-only header values of its API call steps: masked in answers, kept when a change sends the mask back.

const invalid = (message: string) => new HttpError(400, 'invalid_workflow', message)

const TOOL_ROWS = { table: 'agent_tools', typeColumn: 'tool_type' } as const
const ACTION_ROWS = { table: 'agent_actions', typeColumn: 'action_type' } as const

/** Steps that act when entered and then go on by themselves: they need a default transition. */
const needsWayOn = (step: WorkflowStep) => step.type === 'message' || (step.type === 'api_call' && step.run === 'during_call')

/** What the check reads besides the workflow: the agent (absent when it is being created) and its data_retrieval fields. */
interface WorkflowContext {
  db: DB
  userId: string
  /** The agent being changed; undefined on create (it has no tools yet, and no other agent is itself). */
  agentId?: string
  /** Names of the agent's data_retrieval fields (the ones the request sets, else the stored ones). */
  retrievalFields: string[]
}

/** The variable names a workflow's expressions may read: set by a step, the agent's fields, or the call's own. */
function knownVariables (workflow: Workflow, retrievalFields: string[]): Set<string> {
  const names = new Set<string>([...CALL_VARIABLES, ...retrievalFields])
  for (const step of workflow.steps) {
    if (step.type === 'conversation') for (const item of step.variables ?? []) names.add(item.name)
    if (step.type === 'api_call' && step.run === 'during_call') {
      names.add(`${step.id}_status`)
      for (const name of Object.keys(step.response_variables ?? {})) names.add(name)
    }
  }
  return names
}

/** The ids of steps a call can reach: from the start along transitions, and every global step (offered everywhere). */
function reachableSteps (workflow: Workflow): Set<string> {
  const byId = new Map(workflow.steps.map((step) => [step.id, step]))
  const seen = new Set<string>()
  const queue = [workflow.start, ...workflow.steps.filter((step) => step.global !== undefined).map((step) => step.id)]
  while (queue.length > 0) {
    const id = queue.shift()!
    if (seen.has(id) || !byId.has(id)) continue
    seen.add(id)
    for (const transition of byId.get(id)!.transitions ?? []) queue.push(transition.to)
  }
  return seen
}

/** The graph's rules, without the database: the first broken one as a 400 naming its member. */
function checkGraph (workflow: Workflow, retrievalFields: string[]): void {
  const first = new Map<string, number>()
  workflow.steps.forEach((step, i) => {
    const other = first.get(step.id)
    if (other !== undefined) throw invalid(`body.workflow.steps[${i}].id "${step.id}" is the id of steps[${other}] too; step ids must be unique`)
    first.set(step.id, i)
  })
  if (!first.has(workflow.start)) throw invalid(`body.workflow.start "${workflow.start}" is not the id of any step`)
  const known = knownVariables(workflow, retrievalFields)
  workflow.steps.forEach((step, i) => {
    const at = `body.workflow.steps[${i}]`
    const transitions = step.transitions ?? []
    if ((step.type === 'transfer' || step.type === 'end') && transitions.length > 0) {
      throw invalid(`${at}.transitions must be empty: a ${step.type} step is where the agent's part of the call ends, so nothing follows it`)
    }
    transitions.forEach((transition, j) => {
      const where = `${at}.transitions[${j}]`
      if (!first.has(transition.to)) throw invalid(`${where}.to "${transition.to}" is not the id of any step`)
      if (transition.to === step.id) throw invalid(`${where}.to "${transition.to}" is the step itself; a transition leads to another step`)
      const { condition } = transition
      if (condition.type === 'always' && j !== transitions.length - 1) {
        throw invalid(`${where}.condition "always" must be the step's last transition (at most one per step): the ones after it would never be taken`)
      }
      if (condition.type !== 'prompt' && step.type === 'conversation' && (step.variables ?? []).length === 0) {
        const when = condition.type === 'always' ? 'is taken once the step\'s variables are collected' : 'is checked when the step\'s variables are saved'
        throw invalid(`${where}.condition "${condition.type}" of a conversation step ${when}, and this step collects none: use a "prompt" condition (the model moves on when it holds)`)
      }
      if (condition.type === 'prompt' && step.type !== 'conversation') {
        throw invalid(`${where}.condition "prompt" is judged by the model during a conversation step; a ${step.type} step goes on by "expression" or "always"`)
      }
      if (condition.type === 'expression') {
        const parsed = parseCondition(condition.expression)
        if ('error' in parsed) throw invalid(`${where}.condition.expression cannot be read: ${parsed.error}`)
        const unknown = parsed.names.find((name) => !known.has(name))
        if (unknown !== undefined) {
          throw invalid(`${where}.condition.expression reads "${unknown}", which no step collects, no API call step maps, and is no data_retrieval field or call variable`)
        }
      }
    })
    if (needsWayOn(step) && transitions.at(-1)?.condition.type !== 'always') {
      throw invalid(`${at}.transitions needs an "always" transition last: a ${step.type === 'message' ? 'message' : 'during-call API call'} step goes on by itself once it is done`)
    }
    checkStepMembers(step, at)
  })
  const reachable = reachableSteps(workflow)
  const lost = workflow.steps.findIndex((step) => !reachable.has(step.id))
  if (lost !== -1) {
    throw invalid(`body.workflow.steps[${lost}] ("${workflow.steps[lost].name}") cannot be reached from the start step "${workflow.start}" or a global step: lead a transition to it, make it global, or remove it`)
  }
}

/** A step's own members that the schema cannot check. */
function checkStepMembers (step: WorkflowStep, at: string): void {
  if (step.type === 'conversation' && step.variables !== undefined) {
    try {
      dataRetrieval(step.variables)
    } catch (err) {
      if (err instanceof HttpError) throw invalid(err.message.replace(/^body\.data_retrieval\.(\d+)/, `${at}.variables[$1]`))
      throw err
    }
  }
  if (step.type === 'api_call') {
    const problem = headerProblem(step.headers)
    if (problem !== undefined) throw invalid(problem.replace('body.settings.headers', `${at}.headers`))
    const mapped = Object.keys(step.response_variables ?? {})
    if (step.run === 'after_call' && mapped.length > 0) {
      throw invalid(`${at}.response_variables is for run during_call: an after-call step's answer comes when the call is over`)
    }
    const builtIn = mapped.find((name) => CALL_VARIABLES.has(name))
    if (builtIn !== undefined) throw invalid(`${at}.response_variables.${builtIn} is a built-in call variable; choose another name`)
  }
  if (step.type === 'message' && step.to.match(VARIABLE) === null) {
    const valid = step.channel === 'email' ? new RegExp(EMAIL_PATTERN).test(step.to) : new RegExp(E164_PATTERN).test(step.to)
    if (!valid) throw invalid(`${at}.to must be ${step.channel === 'email' ? 'an e-mail address' : 'an E.164 phone number such as +14155550123'} or a {{variable}} that holds one`)
  }
}

/**
 * The whole check: the graph, then what it refers to. A tool or agent that is not the account's answers 404 as
 * the API's other references do; a voice outside the catalogue, an after-call action or the agent itself, 400.
 */
async function checkWorkflow (ctx: WorkflowContext, workflow: Workflow): Promise<void> {
  checkGraph(workflow, ctx.retrievalFields)
  const usable = new Map<string, 'tool' | 'during' | 'after'>()
  if (ctx.agentId !== undefined) {
    for (const row of await listCapabilities(ctx.db, ctx.userId, TOOL_ROWS, ctx.agentId)) usable.set(row.id, 'tool')
    for (const row of await listCapabilities(ctx.db, ctx.userId, ACTION_ROWS, ctx.agentId)) {
      usable.set(row.id, row.settings.when === 'during_call' || row.settings.when === 'both' ? 'during' : 'after')
    }
  }
  for (const [i, step] of workflow.steps.entries()) {
    const at = `body.workflow.steps[${i}]`
    if (step.type === 'conversation') {
      for (const [j, id] of (step.tool_ids ?? []).entries()) {
        const kind = usable.get(id.toLowerCase())
        if (kind === undefined) throw notFound(`${at}.tool_ids[${j}]: tool or action ${id} of this agent`)
        if (kind === 'after') throw invalid(`${at}.tool_ids[${j}] ${id} is an action that runs after the call only; a step may use tools and during-call actions`)
      }
      if (step.voice_id !== undefined && step.voice_id !== null && !await voiceExists(ctx.db, step.voice_id)) {
        throw invalid(`${at}.voice_id ${step.voice_id} is not a voice of GET /v1/voice/list`)
      }
    }
    if (step.type === 'transfer' && step.target.type === 'agent') {
      const target = step.target.agent_id.toLowerCase()
      if (target === ctx.agentId) throw invalid(`${at}.target.agent_id is this agent itself; a transfer goes to another agent`)
      if (await findAgent(ctx.db, ctx.userId, target) === undefined) throw notFound(`${at}.target.agent_id: agent ${target}`)
    }
  }
}

// Write-only header values of API call steps.

const isApiCall = (step: WorkflowStep): step is ApiCallStep => step.type === 'api_call'

/** The workflow as answers show it: each API call step's header values replaced by the mask. */
export function maskWorkflow (workflow: Workflow): Workflow {
  return { ...workflow, steps: workflow.steps.map((step) => isApiCall(step) ? maskSettings(step) as ApiCallStep : step) }
}

/**
 * Puts stored header values back where a change sends the mask, matching API call steps by id (`stored`: the
 * workflow as it is, headers readable; null on create). A step whose URL moved to another origin keeps none of
 * them. Changes `workflow` in place; refuses a mask with nothing (or nothing it may keep) behind it.
 */
function unmaskWorkflow (workflow: Workflow, stored: Workflow | null): void {
  const before = new Map((stored?.steps ?? []).filter(isApiCall).map((step) => [step.id, step]))
  workflow.steps.forEach((step, i) => {
    if (!isApiCall(step)) return
    const at = `body.workflow.steps[${i}].headers`
    const previous = before.get(step.id)
    const settings = step as unknown as Record<string, unknown>
    if (previous !== undefined && movesOrigin('url', previous as unknown as Record<string, unknown>, settings)) {
      const kept = forgetStoredCredentials(settings, settings)
      if (kept !== undefined) {
        throw invalid(`${at}.${kept} cannot keep its stored value: stored header values go only to the origin they were given for, and the URL now points to another (scheme, host or port); send the value itself`)
      }
      return
    }
    const masked = unmaskSettings(settings, previous as unknown as Record<string, unknown> | undefined)
    if (masked !== undefined) {
      throw invalid(previous === undefined && stored === null
        ? `${at}.${masked} must be the header's value, not the mask`
        : `${at}.${masked} has no stored value to keep; send the value itself`)
    }
  })
}

/**
 * A change's workflow as it is to be stored (null removes it): stored header values kept where the mask is sent back,
 * checked against the agent's data_retrieval fields as they will be (`retrieval`: the change's, else the stored ones).
 * `current` is the agent as it is (without an id: one being created). The API's PATCH and the console's forms call it
 * under the agent's row lock; it throws before anything is written,
 * so a bad workflow leaves the stored one in place.
 */
export async function changedWorkflow (
  db: DB, current: Pick<AgentRow, 'user_id' | 'workflow' | 'data_retrieval'> & { id?: string }, workflow: Workflow | null, retrieval?: AgentRow['data_retrieval']
): Promise<Workflow | null> {
  if (workflow === null) return null
  unmaskWorkflow(workflow, current.workflow as unknown as Workflow | null)
  await checkWorkflow({ db, userId: current.user_id, agentId: current.id, retrievalFields: (retrieval ?? current.data_retrieval).map((field) => field.name) }, workflow)
  return workflow
}
