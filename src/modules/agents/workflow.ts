import { Type, type Static, type TObject, type TUnion } from 'typebox'
import { COMPONENT, E164, ObjectId } from '../../http/schemas.ts'
import { DataRetrievalItem, DeliveryMembers, Dialling, RequestMembers } from './settings-parts.ts'

// An agent's workflow (DESIGN.md, "Workflows"): steps the conversation moves through, each with its own
// instructions and tools (conversation), or an act of the agent's (an API call, a message, a transfer, the end);
// transitions between them judged by the model (offered as functions) or on the variables collected so far.
// Stored in agents.workflow (null: the agent talks from its single prompt), as part of each agent version.

/**
 * A union told apart by its `type` member, as a discriminated oneOf: Ajv then checks the one branch the type names,
 * and its removal of unknown members cannot strip one branch's members through another's.
 */
export function byType<T extends TObject[]> (branches: [...T], options: Record<string | symbol, unknown>) {
  return Type.Unsafe<Static<TUnion<T>>>({ ...options, type: 'object', required: ['type'], discriminator: { propertyName: 'type' }, oneOf: branches })
}

export const StepId = Type.String({ pattern: '^[a-z][a-z0-9_]{0,39}$', description: 'lower-case letters, digits and _ (it names the step\'s functions)' })

export const TransitionCondition = byType([
  Type.Object({ type: Type.Literal('prompt'), prompt: Type.String({ minLength: 1, maxLength: 500, description: 'when the model should move on, in plain language ("the caller has chosen a time"); offered to it as a function' }) }),
  Type.Object({ type: Type.Literal('expression'), expression: Type.String({ minLength: 1, maxLength: 300, description: 'on the variables: `party_size > 8`, `{{insured}} = true`, `plan = "gold" and age >= 18` (docs/workflows.md, "Conditions")' }) }),
  Type.Object({ type: Type.Literal('always') }, { description: 'the default: taken when no other transition of the step is (at most one per step)' })
], { [COMPONENT]: 'WorkflowCondition' })

export const Transition = Type.Object({
  to: StepId,
  condition: TransitionCondition
}, { [COMPONENT]: 'WorkflowTransition' })

const common = {
  id: StepId,
  name: Type.String({ minLength: 1, maxLength: 100 }),
  transitions: Type.Optional(Type.Array(Transition, { maxItems: 20, description: 'checked in order; expressions when variables change, prompts as functions the model calls (default none)' })),
  global: Type.Optional(Type.Object({
    prompt: Type.String({ minLength: 1, maxLength: 500, description: 'when to come here ("the caller asks for a human")' })
  }, { description: 'reachable from every conversation step when this holds, offered to the model as a function' }))
}

export const ConversationStep = Type.Object({
  ...common,
  type: Type.Literal('conversation'),
  instructions: Type.String({ maxLength: 20_000, description: 'what the agent does in this step, added to the LLM configuration\'s general_prompt; {{variables}} are filled in' }),
  tool_ids: Type.Optional(Type.Array(ObjectId, { maxItems: 50, uniqueItems: true, description: 'ids of the agent\'s tools and during-call actions usable in this step; absent: all of them; [] : none' })),
  variables: Type.Optional(Type.Array(DataRetrievalItem, { maxItems: 20, description: 'what the agent collects in this step (a function it calls with what the caller said); each joins the call\'s variables and custom_analysis_data under its name' })),
  voice_id: Type.Optional(Type.Union([ObjectId, Type.Null()], { description: 'a voice of GET /v1/voice/list for this step; null or absent: the agent\'s (the realtime engine keeps the voice it started with)' })),
  interruption_sensitivity: Type.Optional(Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()], { description: 'this step\'s; null or absent: the agent\'s' }))
}, { [COMPONENT]: 'WorkflowConversationStep' })

export const ApiCallStep = Type.Object({
  ...common,
  type: Type.Literal('api_call'),
  run: Type.Union([Type.Literal('during_call'), Type.Literal('after_call')], { description: 'during_call: sent when the step is reached, its answer mapped into variables; after_call: a post-call delivery (kind workflow_step) once the call is analysed' }),
  ...RequestMembers,
  response_variables: Type.Optional(Type.Record(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]{0,63}$' }), Type.String({ minLength: 1, maxLength: 200 }), {
    maxProperties: 20,
    description: 'during_call: variable name → where its value is in the JSON answer (`data.slots[0].id`); the answer\'s status is `{{<step id>_status}}`'
  })),
  ...DeliveryMembers
}, { [COMPONENT]: 'WorkflowApiCallStep' })

export const MessageStep = Type.Object({
  ...common,
  type: Type.Literal('message'),
  channel: Type.Union([Type.Literal('email'), Type.Literal('sms'), Type.Literal('chat')]),
  to: Type.String({ minLength: 1, maxLength: 320, description: 'recipient: an address or number, or a {{variable}} such as {{customer_phone}}' }),
  subject: Type.Optional(Type.String({ maxLength: 200, description: 'e-mail only' })),
  message: Type.String({ minLength: 1, maxLength: 1600, description: '{{variables}} are filled in' })
}, { [COMPONENT]: 'WorkflowMessageStep' })

export const TransferStep = Type.Object({
  ...common,
  type: Type.Literal('transfer'),
  message: Type.Optional(Type.String({ maxLength: 1000, description: 'what the agent says before it transfers' })),
  target: byType([
    Type.Object({ type: Type.Literal('agent'), agent_id: ObjectId }),
    Type.Object({ type: Type.Literal('number'), phone_number: E164, ...Dialling })
  ], {})
}, { [COMPONENT]: 'WorkflowTransferStep' })

export const EndStep = Type.Object({
  ...common,
  type: Type.Literal('end'),
  message: Type.Optional(Type.String({ maxLength: 1000, description: 'the agent\'s last words' }))
}, { [COMPONENT]: 'WorkflowEndStep' })

export const WorkflowStep = byType([ConversationStep, ApiCallStep, MessageStep, TransferStep, EndStep], { [COMPONENT]: 'WorkflowStep' })

export const Workflow = Type.Object({
  start: StepId,
  steps: Type.Array(WorkflowStep, { minItems: 1, maxItems: 50 })
}, { [COMPONENT]: 'Workflow', description: 'the conversation as steps (docs/workflows.md); null: the agent talks from its single prompt' })

export type Workflow = Static<typeof Workflow>
export type WorkflowStep = Static<typeof WorkflowStep>
export type ConversationStep = Static<typeof ConversationStep>
export type ApiCallStep = Static<typeof ApiCallStep>
export type Transition = Static<typeof Transition>
