import pino from 'pino'
import t from 'tap'
import { createMailer } from '../../src/mail/mailer.ts'
import { TextConversation } from '../../src/modules/voice/text-run.ts'
import { createAccount, setup } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { startReceiver } from '../helpers/receiver.ts'

// A workflow in a typed conversation (voice/text-run.ts, what test chats and scenarios run on): the state goes on
// from a saved conversation, and a test's mocks answer API call steps by their ids.

t.test('a saved conversation resumes its workflow where it was; a mocked API call step sends nothing', async (t) => {
  const llm = await startOpenAiHttpStandin(t)
  const receiver = await startReceiver(t)
  const ctx = await setup(t, { LLM_URL: llm.url, DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true' })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const patched = await ctx.app.inject({
    method: 'PATCH',
    url: `/v1/agent/${agent._id}`,
    headers: account.headers,
    payload: {
      workflow: {
        start: 'ask',
        steps: [
          { id: 'ask', name: 'Ask', type: 'conversation', instructions: 'Ask for the order number.', variables: [{ name: 'order', type: 'string', required: true }], transitions: [{ to: 'lookup', condition: { type: 'always' } }] },
          { id: 'lookup', name: 'Lookup', type: 'api_call', run: 'during_call', url: `${receiver.url}/orders/{{order}}`, method: 'GET', response_variables: { eta: 'eta' }, transitions: [{ to: 'tell', condition: { type: 'always' } }] },
          { id: 'tell', name: 'Tell', type: 'conversation', instructions: 'The order arrives {{eta}}.' }
        ]
      }
    }
  })
  t.equal(patched.statusCode, 200, patched.body)
  const log = pino({ level: 'silent' })
  const deps = { db: ctx.db, boss: ctx.boss, config: ctx.config, log, mailer: createMailer(ctx.db, ctx.config, log) }

  const first = await TextConversation.open(deps, { userId: account.user.id, agentId: agent._id })
  llm.replies.push({ text: 'Which order?' })
  await first.say('Where is my order?')
  const saved = first.conversation()
  t.match(saved.workflow, { step: 'ask', path: [{ id: 'ask' }], variables: {} })
  await first.close()

  llm.replies.push({ toolCalls: [{ name: 'save_variables', arguments: { order: 'A17' } }] }, { text: 'It arrives tomorrow.' })
  const next = await TextConversation.open(deps, { userId: account.user.id, agentId: agent._id, conversation: saved, mocks: { lookup: '{"eta":"tomorrow"}' } })
  const turn = await next.say('A17.')
  t.match(llm.requests.chat.at(-2)!.body.messages[0].content, /step "Ask"/, 'the saved step, not entered again')
  t.same(turn.items.map((item) => item.speaker), ['user', 'tool', 'step', 'step', 'agent'])
  t.match(llm.requests.chat.at(-1)!.body.messages[0].content, /step "Tell"[\s\S]*The order arrives tomorrow\./, 'the mock answered the API call step')
  t.equal(receiver.received.length, 0, 'a mocked step sends nothing')
  const state = next.conversation().workflow!
  t.same(state.path.map((entry) => entry.id), ['ask', 'lookup', 'tell'], 'the path goes on from the saved one')
  t.same(state.variables, { order: 'A17', lookup_status: 200, eta: 'tomorrow' })
  await next.close()
})
