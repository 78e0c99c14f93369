import { parseCondition } from '../agents/conditions.ts'
import { openSettings } from '../agents/queries.ts'
import type { ApiCallStep, ConversationStep, Transition, Workflow, WorkflowStep } from '../agents/workflow.ts'
import type { RetrievalField, WorkflowState } from '../../db/shapes.ts'
import { guardedAgent } from '../../net/guard.ts'
import { renderRecord, renderText, text } from '../../templates.ts'
import type { LiveTool, ToolContext, ToolOutcome } from '../capabilities/live.ts'
import { uniqueName } from '../capabilities/load.ts'
import { dialTarget } from '../capabilities/types/call-forwarding.ts'
import { liveRequest, type ApiCallSettings } from '../capabilities/types/api-call.ts'
import { sendMessage } from '../messaging/send.ts'
import { collectFunction } from './collect.ts'
import { valueAt } from './paths.ts'

// How a call runs its agent's workflow (docs/workflows.md, "How a call runs a workflow"): the step it is in gives
// the model its instructions and functions (the step's tools, a function that saves its variables, one per
// transition judged by the model and per global step); action steps (API calls, messages, transfers, the end) run
// as soon as they are entered. The session keeps one WorkflowRun per call and moves it when a function asks to.

/** Action steps run one after the other within one move at most this many times: a loop of them stops there. */
export const MAX_ACTION_STEPS = 20
/** How much of an API call step's answer is read for its response_variables. */
const STEP_ANSWER_BYTES = 65_536
/** The name of a step's function that saves its variables (a suffix when a tool has it already). */
const SAVE_FUNCTION = 'save_variables'

type Variables = WorkflowState['variables']
export type Entered = { id: string, name: string, type: string }

/** What a move did: the steps entered, what the model is told, and what the session must do (end, transfer). */
export interface EnterResult { entered: Entered[], output: string, outcome?: Omit<ToolOutcome, 'output'> }

/** A step's variables as the collect function's fields (the defaults of a data_retrieval field). */
const fieldsOf = (step: ConversationStep): RetrievalField[] => (step.variables ?? []).map((item) => ({
  name: item.name, type: item.type, description: item.description ?? '', required: item.required ?? false, ...(item.enum_values === undefined ? {} : { enum_values: item.enum_values })
}))

/** A value as a workflow variable holds it: scalars as they are, lists and objects as JSON text. */
const asVariable = (value: unknown): Variables[string] =>
  value === undefined || value === null ? null : typeof value === 'object' ? JSON.stringify(value) : (value as string | number | boolean)

export class WorkflowRun {
  private readonly workflow: Workflow
  private readonly steps: Map<string, WorkflowStep>
  private readonly data: WorkflowState
  private readonly wall: () => number
  private moving: Promise<unknown> = Promise.resolve()
  /** Step id → the answer an API call step gets instead of sending its request (a test's mocks; status 200). */
  mocks: Record<string, string> = {}
  /** Expression conditions parsed once (an expression that does not parse never holds: the API refuses it). */
  private readonly conditions = new Map<string, ((variables: Record<string, unknown>) => boolean)>()

  constructor (workflow: Workflow, state: WorkflowState | undefined, wall: () => number) {
    this.workflow = workflow
    this.steps = new Map(workflow.steps.map((step) => [step.id, step]))
    this.wall = wall
    this.data = state === undefined
      ? { step: workflow.start, path: [], variables: {}, after: [] }
      : { step: state.step, path: [...state.path], variables: { ...state.variables }, after: [...state.after] }
  }

  /** Where the call is, what it collected, the after-call steps reached (the conversation's `workflow`). */
  state (): WorkflowState {
    return { step: this.data.step, path: [...this.data.path], variables: { ...this.data.variables }, after: [...this.data.after] }
  }

  get variables (): Variables {
    return this.data.variables
  }

  /** The variables that hold a value (collected data reads them so). */
  collected (): Record<string, string | number | boolean> {
    return Object.fromEntries(Object.entries(this.data.variables).filter((entry): entry is [string, string | number | boolean] => entry[1] !== null))
  }

  /** The conversation step in force: the current one, else the last one entered (after action steps that led nowhere). */
  private conversationStep (): ConversationStep | undefined {
    const ids = [this.data.step, ...this.data.path.map((entry) => entry.id).reverse()]
    for (const id of ids) {
      const step = this.steps.get(id)
      if (step?.type === 'conversation') return step
    }
    return undefined
  }

  /**
   * The current conversation step's prompt part and functions: the agent's tools it allows (by capabilityId), its
   * collect function, its transition functions and the global steps' functions (each answering ToolOutcome.step).
   * `variables` fill the step's {{variables}} (the call's; the workflow's own are added). `collect` names the save
   * function and its fields, for the session's localised collection lines.
   */
  setup (agentTools: LiveTool[], variables: Record<string, unknown> = {}): {
    instructions: string, tools: LiveTool[], voiceId?: string, interruptionSensitivity?: number, collect?: { fields: RetrievalField[], tool: string }
  } {
    const step = this.conversationStep()
    if (step === undefined) return { instructions: '', tools: [] }
    const allowed = step.tool_ids === undefined ? undefined : new Set(step.tool_ids)
    const tools = allowed === undefined ? [...agentTools] : agentTools.filter((tool: LiveTool & { capabilityId?: string }) => tool.capabilityId !== undefined && allowed.has(tool.capabilityId))
    const taken = new Set(tools.map((tool) => tool.spec.name))
    const fields = fieldsOf(step)
    let collect: { fields: RetrievalField[], tool: string } | undefined
    if (fields.length > 0) {
      const name = uniqueName(SAVE_FUNCTION, taken)
      collect = { fields, tool: name }
      tools.push(collectFunction(fields, this.data.variables, name,
        `Save what the caller told you for the step "${step.name}", as soon as they say it: one or several values at a time. Save a value again to correct it.`,
        (outcome, ctx) => this.afterCollect(step, outcome, ctx)))
    }
    for (const transition of step.transitions ?? []) {
      if (transition.condition.type === 'prompt') tools.push(this.moveFunction(transition.to, transition.condition.prompt, taken))
      // A step that collects nothing has no save after which its default could be taken: the model takes it.
      else if (transition.condition.type === 'always' && fields.length === 0) tools.push(this.moveFunction(transition.to, `what this step is for ("${step.name}") is done`, taken))
    }
    for (const target of this.workflow.steps) {
      if (target.global === undefined || target.id === step.id) continue
      tools.push(this.moveFunction(target.id, target.global.prompt, taken))
    }
    const filled = renderText(step.instructions, { ...variables, ...this.data.variables })
    return {
      instructions: [`You are in the step "${step.name}" of this conversation.`, filled].filter((line) => line.trim() !== '').join('\n'),
      tools,
      ...(step.voice_id === undefined || step.voice_id === null ? {} : { voiceId: step.voice_id }),
      ...(step.interruption_sensitivity === undefined || step.interruption_sensitivity === null ? {} : { interruptionSensitivity: step.interruption_sensitivity }),
      ...(collect === undefined ? {} : { collect })
    }
  }

  /** A function the model calls when a plain-language condition holds: the call moves to `to`. */
  private moveFunction (to: string, when: string, taken: Set<string>): LiveTool {
    const target = this.steps.get(to)
    const name = uniqueName(`go_to_${to}`, taken)
    return {
      type: 'workflow_transition',
      spec: { name, description: `Move the conversation on to "${target?.name ?? to}" when this holds: ${when}`, parameters: { type: 'object', properties: {} } },
      run: async () => ({ output: `Moving on to "${target?.name ?? to}".`, step: to })
    }
  }

  /** After the step's variables changed: its first expression that holds, else its default once every required variable is in. */
  private afterCollect (step: ConversationStep, outcome: ToolOutcome, ctx: ToolContext): ToolOutcome {
    const complete = fieldsOf(step).every((field) => !field.required || (this.data.variables[field.name] !== undefined && this.data.variables[field.name] !== null))
    const next = this.next(step, complete, ctx)
    return next === undefined ? outcome : { ...outcome, step: next }
  }

  /** The step that `step` leads to now: its first expression transition that holds, else its `always` one when `orDefault`. */
  private next (step: WorkflowStep, orDefault: boolean, ctx: ToolContext): string | undefined {
    const transitions: Transition[] = step.transitions ?? []
    // On the workflow's variables, and the call's (its own, dynamic_context, what data collection saved): the workflow's win.
    const variables = { ...ctx.variables(), ...this.data.variables }
    const holds = transitions.find((transition) => transition.condition.type === 'expression' && this.holds(transition.condition.expression, variables))
    if (holds !== undefined) return holds.to
    return orDefault ? transitions.find((transition) => transition.condition.type === 'always')?.to : undefined
  }

  private holds (expression: string, variables: Record<string, unknown>): boolean {
    let test = this.conditions.get(expression)
    if (test === undefined) {
      const parsed = parseCondition(expression)
      test = 'error' in parsed ? () => false : parsed.test
      this.conditions.set(expression, test)
    }
    return test(variables)
  }

  /**
   * Enters `stepId` and runs the action steps that follow (API calls during the call, messages, after-call steps
   * recorded) until a conversation step, a transfer or an end; at most MAX_ACTION_STEPS action steps.
   */
  async enter (stepId: string, ctx: ToolContext): Promise<EnterResult> {
    // One move at a time: two functions called at once (a model's parallel calls) move the call one after the other.
    const move = this.moving.then(async () => await this.move(stepId, ctx))
    this.moving = move.catch(() => {})
    return await move
  }

  private async move (stepId: string, ctx: ToolContext): Promise<EnterResult> {
    const entered: Entered[] = []
    const notes: string[] = []
    let id: string | undefined = stepId
    for (let actions = 0; id !== undefined; actions++) {
      const step = this.steps.get(id)
      if (step === undefined) return { entered, output: [...notes, `There is no step "${id}" in this workflow; the conversation stays where it is.`].join(' ') }
      if (actions >= MAX_ACTION_STEPS) {
        ctx.log.warn({ step: id }, 'workflow: too many action steps in a row; stopped')
        return { entered, output: [...notes, 'The workflow stopped after too many automatic steps in a row; carry on with the caller.'].join(' ') }
      }
      this.data.step = step.id
      this.data.path.push({ id: step.id, name: step.name, type: step.type, at: this.wall() })
      entered.push({ id: step.id, name: step.name, type: step.type })
      switch (step.type) {
        case 'conversation':
          return { entered, output: [...notes, `You are now in the step "${step.name}": follow its instructions.`].join(' ') }
        case 'end': {
          const message = step.message === undefined || step.message === '' ? undefined : renderText(step.message, this.fill(ctx))
          return {
            entered,
            output: [...notes, message === undefined ? 'The call ends now: say a short goodbye.' : `The call ends now: say exactly this and nothing more: ${message}`].join(' '),
            outcome: { endCall: message === undefined ? {} : { message } }
          }
        }
        case 'transfer': {
          const message = step.message === undefined || step.message === '' ? undefined : renderText(step.message, this.fill(ctx))
          const say = message === undefined ? 'tell the caller so in one short sentence' : `say exactly this: ${message}`
          const outcome = step.target.type === 'agent'
            ? { transferTo: step.target.agent_id }
            : { forwardTo: dialTarget('agent_transfer', step.target.phone_number, step.target) }
          return { entered, output: [...notes, `The call is being transferred: ${say}.`].join(' '), outcome }
        }
        case 'api_call':
          if (step.run === 'after_call') {
            if (!this.data.after.includes(step.id)) this.data.after.push(step.id)
          } else {
            notes.push(await this.callApi(step, ctx))
          }
          break
        case 'message':
          notes.push(await this.sendStepMessage(step, ctx))
          break
      }
      id = this.next(step, true, ctx)
    }
    return { entered, output: notes.join(' ') }
  }

  /** The variables a step's texts are filled with: the call's, the workflow's own. */
  private fill (ctx: ToolContext): Record<string, unknown> {
    return { ...this.data.variables, ...ctx.variables() }
  }

  /** An API call step during the call: sent as an api_call action's live request, its answer mapped into variables. */
  private async callApi (step: ApiCallStep, ctx: ToolContext): Promise<string> {
    const { status, answer, failure } = Object.hasOwn(this.mocks, step.id) ? { status: 200, answer: this.mocks[step.id], failure: undefined } : await this.request(step, ctx)
    this.data.variables[`${step.id}_status`] = status
    let parsed: unknown
    try {
      parsed = answer === '' ? undefined : JSON.parse(answer)
    } catch {
      parsed = undefined
    }
    const mapped = Object.entries(step.response_variables ?? {})
    for (const [name, path] of mapped) this.data.variables[name] = failure === undefined ? asVariable(valueAt(parsed, path)) : null
    if (failure !== undefined) ctx.log.warn({ step: step.id, reason: failure }, 'workflow: an API call step failed')
    return failure === undefined
      ? `${step.name}: done${mapped.length === 0 ? '' : ` (${mapped.map(([name]) => `${name} = ${text(this.data.variables[name])}`).join(', ')})`}.`
      : `${step.name} failed (${failure}).`
  }

  /** An API call step's request, sent as an api_call action's live request: its HTTP status (0: none), answer, and why it failed. */
  private async request (step: ApiCallStep, ctx: ToolContext): Promise<{ status: number, answer: string, failure?: string }> {
    const settings = openSettings(step) as unknown as ApiCallSettings
    const variables = this.fill(ctx)
    const agent = guardedAgent(ctx.config.delivery)
    try {
      const outcome = await liveRequest(agent, settings, variables, renderRecord(settings.body ?? {}, variables), ctx, STEP_ANSWER_BYTES)
      const failure = outcome.ok ? undefined : outcome.status_code === undefined ? outcome.error ?? 'the request failed' : `HTTP ${outcome.status_code}`
      return { status: outcome.status_code ?? 0, answer: outcome.response_preview ?? '', ...(failure === undefined ? {} : { failure }) }
    } catch (err) {
      return { status: 0, answer: '', failure: err instanceof Error ? err.message : String(err) }
    } finally {
      await agent.close().catch(() => {})
    }
  }

  /** A message step: sent through the messaging module as the message actions' functions send theirs. */
  private async sendStepMessage (step: Extract<WorkflowStep, { type: 'message' }>, ctx: ToolContext): Promise<string> {
    const variables = this.fill(ctx)
    const to = renderText(step.to, variables).trim()
    if (to === '') return `${step.name}: not sent (no recipient).`
    const result = await sendMessage({ db: ctx.db, config: ctx.config, log: ctx.log, mailer: ctx.mailer }, {
      userId: ctx.userId,
      callId: ctx.callId,
      origin: 'live',
      actionId: step.id,
      channel: step.channel,
      to,
      ...(step.channel === 'email' && step.subject !== undefined ? { subject: renderText(step.subject, variables) } : {}),
      text: renderText(step.message, variables)
    })
    return result.status === 'sent' || result.status === 'recorded' ? `${step.name}: sent to ${to}.` : `${step.name}: could not be sent (${result.error ?? result.status}).`
  }
}
