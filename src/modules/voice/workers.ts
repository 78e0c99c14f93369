import type { Job } from 'pg-boss'
import { QUEUES, workOn, type QueuePayloads } from '../../jobs/queues.ts'
import { findAgent } from '../agents/queries.ts'
import { CALL_SETTINGS_DEFAULTS } from '../agents/schemas.ts'
import { endCall } from '../calls/lifecycle.ts'
import { findCallRow } from '../calls/queries.ts'
import type { SessionDeps, SessionEvent, Transport } from './session.ts'
import { Session } from './session.ts'

// Simulated calls (CALL_RUNTIME=simulator, and phone calls the voice runtime cannot place yet) are held by
// the same session as live ones: the simulator engine answers, and a scripted caller speaks in turn.

interface CallerLines { request: (context: string) => string, accept: string }

const CALLER: Record<string, CallerLines> = {
  en: {
    request: (context) => `Hi, I am calling about an appointment${context}. Do you have time next Tuesday?`,
    accept: 'Yes, that works for me. Thank you, that was very helpful!'
  },
  de: {
    request: (context) => `Hallo, ich rufe wegen eines Termins an${context}. Haben Sie nächsten Dienstag Zeit?`,
    accept: 'Ja, das passt. Danke, das war sehr hilfreich!'
  }
}

/** The simulated caller: says its next line whenever the agent has finished, and hangs up after the last answer. */
function scriptedCaller (language: string, dynamicContext: Record<string, unknown>, session: () => Session): Transport {
  const german = language.toLowerCase().startsWith('de')
  const lines = CALLER[german ? 'de' : 'en']
  const name = dynamicContext.customer_name ?? dynamicContext.name
  const context = name === undefined ? '' : (german ? ` für ${String(name)}` : ` for ${String(name)}`)
  const script = [lines.request(context), lines.accept]
  let agentSpoke = false
  const next = () => {
    const line = script.shift()
    if (line === undefined) session().hangup('agent_hangup')
    else session().text(line)
  }
  return {
    sendAudio () {},
    send (event: SessionEvent) {
      // An agent without a begin message waits for the caller, who then speaks first.
      if (event.type === 'ready') queueMicrotask(() => { if (!agentSpoke) next() })
      // The agent stopped speaking: the caller answers (after the agent's goodbye, it hangs up).
      if (event.type === 'agent_speaking') {
        agentSpoke = true
        if (!event.speaking) queueMicrotask(next)
      }
    },
    close () {}
  }
}

/** A simulated call: phone numbers ending in 0000 do not answer; every other call is held through the session. */
export async function simulateCall (deps: SessionDeps, callId: string): Promise<void> {
  const call = await findCallRow(deps.db, callId)
  if (call === undefined || call.call_status !== 'started') return
  if (call.call_type === 'phone' && call.call_to?.endsWith('0000') === true) {
    await endCall(deps.db, deps, call.user_id, call.id, { outcome: 'failed', disconnection_reason: 'no_answer' })
    return
  }
  const agent = await findAgent(deps.db, call.user_id, call.agent_id)
  const language = String(agent?.call_settings.language ?? CALL_SETTINGS_DEFAULTS.language)
  const holder: { session?: Session } = {}
  const transport = scriptedCaller(language, call.dynamic_context, () => holder.session!)
  holder.session = Session.open(deps, call, transport, { engine: 'simulator' })
  await holder.session.done
}

export async function registerVoiceWorkers (deps: SessionDeps): Promise<void> {
  // The simulator's answers become ready at their time without a NOTIFY: poll for them every second.
  await workOn(deps.boss, QUEUES.simulateCall, { pollingIntervalSeconds: 1, notifyPollingIntervalSeconds: 1 }, async (jobs: Array<Job<QueuePayloads[typeof QUEUES.simulateCall]>>) => {
    for (const job of jobs) await simulateCall(deps, job.data.callId)
  })
}
