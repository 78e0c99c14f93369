import { Type, type Static } from 'typebox'
import { Conversation, TranscriptItem } from '../../db/shapes.ts'
import { COMPONENT } from '../../http/schemas.ts'
import { TurnTiming } from '../calls/schemas.ts'
import { badRequest, notFound } from '../../http/errors.ts'
import { agentExists } from '../agents/queries.ts'
import type { SessionDeps } from '../voice/session.ts'
import { TextConversation } from '../voice/text-run.ts'
import { MAX_LINE_CHARS } from './shapes.ts'

// The test chat (docs/testing.md, "Test chat"): typed turns with an agent version through the conversation core,
// one request a turn. Nothing is kept on the server: the client sends back the conversation it was given.

/** Transcript items a test chat's conversation may hold (caller and agent lines, tools, steps). */
export const MAX_CHAT_ITEMS = 400

/** A conversation as the test chat answers it and takes it back: db/shapes.ts's Conversation, its transcript capped. */
export const TestConversation = Type.Object({
  ...Conversation.properties,
  transcript: Type.Array(TranscriptItem, { maxItems: MAX_CHAT_ITEMS }),
  turns: Type.Optional(Type.Array(TurnTiming))
}, { [COMPONENT]: 'TestConversation', description: 'the state of a test chat: send it back as it was with the next message' })

export const TestChatBody = Type.Object({
  message: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_LINE_CHARS, description: 'what the caller types; absent with no conversation: the conversation opens (the begin message)' })),
  conversation: Type.Optional({ ...TestConversation, description: 'the conversation the last answer gave, as it was; absent: a new conversation' }),
  agent_version: Type.Optional(Type.Integer({ minimum: 1, description: 'the version to talk to (default: the latest); a conversation goes on with the version it began with' }))
}, { [COMPONENT]: 'TestChatRequest' })
export type TestChatBody = Static<typeof TestChatBody>

export const TestChatReply = Type.Object({
  conversation: TestConversation,
  items: Type.Array(TranscriptItem, { description: 'what this turn added: the caller\'s line, tool calls, steps entered, the agent\'s answer' }),
  ended: Type.Boolean(),
  end_reason: Type.Union([Type.String(), Type.Null()]),
  engine: Type.Enum(['text', 'simulator']),
  notice: Type.Union([Type.String(), Type.Null()], { description: 'set when no LLM is configured: the simulator answered' })
}, { [COMPONENT]: 'TestChatReply' })
export type TestChatReply = Static<typeof TestChatReply>

export interface TestChatInput { message?: string, conversation?: Conversation, version?: number | null }

export const SIMULATOR_NOTICE = 'No language model is configured (LLM_URL or OPENAI_API_KEY): the simulator answered, not the agent\'s model. Tools and workflow steps still run.'

/**
 * One turn of a test chat: opens the conversation (or goes on from `conversation`), says `message`, answers what
 * came of it. Nothing is stored; unmocked tools act for real. 404: not the account's agent or version; 400
 * `message_required` to go on without a message.
 */
export async function testChatTurn (deps: SessionDeps, userId: string, agentId: string, input: TestChatInput): Promise<TestChatReply> {
  if (input.conversation !== undefined && input.message === undefined) throw badRequest('say something to go on with the conversation (message)', 'message_required')
  if (!await agentExists(deps.db, userId, agentId)) throw notFound(`agent ${agentId}`)
  const run = await TextConversation.open(deps, { userId, agentId, version: input.version ?? null, conversation: input.conversation })
  try {
    // A new conversation's items start with its begin message.
    const items = input.conversation === undefined ? [...run.conversation().transcript] : []
    if (input.message !== undefined) items.push(...(await run.say(input.message)).items)
    return {
      conversation: run.conversation(),
      items,
      ended: run.ended,
      end_reason: run.endReason,
      engine: run.engine,
      notice: run.engine === 'simulator' ? SIMULATOR_NOTICE : null
    }
  } finally {
    await run.close()
  }
}
