import type { WebSocket } from 'ws'
import { hashToken } from '../users/keys.ts'
import type { LiveCalls } from '../voice/live-calls.ts'
import { Session, type ForwardRequest } from '../voice/session.ts'
import { CLOSE, SocketLoop } from '../voice/socket-loop.ts'
import { parseTwilioMessage, twilioTransport, type TwilioTransport } from '../voice/transports/twilio.ts'
import { callTwilio, forwardCall, sendKeys, type TelephonyDeps } from './calls.ts'
import type { Conversation } from '../../db/shapes.ts'
import { setCarrierCallId, takeStreamToken } from './queries.ts'

// One Twilio media stream: `start` names the call by its one-time token; media goes to the call's session
// until `stop` (the caller hung up, or a <Dial> took the call) or until the stream drops. A stream without a
// valid `start` within VOICE_STREAM_START_TIMEOUT_MS is closed: anyone can open one. The socket (admission,
// pings, faults, close codes) is the shared socket loop's (voice/socket-loop.ts).

/** `started`: the stream is tied to its call (its token taken), so it no longer counts as pending (StreamAdmission). */
export function acceptTwilioStream (socket: WebSocket, deps: TelephonyDeps, live: LiveCalls, started: () => void): void {
  const { log } = deps
  const { streamTimeoutMs: timeoutMs, streamStartTimeoutMs: startTimeoutMs } = deps.config.voice
  let session: Session | undefined
  let transport: TwilioTransport | undefined
  let callSid: string | undefined
  let starting = false
  let stopped = false
  /** A <Dial> is taking the call: the stream ending now is not the call ending. */
  let forwarding = false
  /** Media that came while the call was being opened: the session keeps what it can use (Session.audio). */
  let opening: Int16Array[] = []

  const loop = new SocketLoop(socket, {
    receive (data, isBinary) {
      const input = parseTwilioMessage(data, isBinary)
      switch (input.kind) {
        case 'start':
          if (starting) return 'a second start'
          starting = true
          open(input).catch((err: unknown) => {
            log.error({ err }, 'the media stream could not open its call')
            loop.fail('protocol_error', 'the call could not be opened')
          })
          return
        case 'media':
          // Two seconds of 20 ms frames at most: a start whose call takes longer to open loses the earliest.
          if (session === undefined && starting && opening.push(input.pcm) > 100) opening.shift()
          session?.audio(input.pcm)
          return
        case 'mark':
          transport?.marked(input.name)
          return
        case 'dtmf':
          session?.keypad(input.digit)
          return
        case 'stop':
          stopped = true
          session?.hangup('user_hangup')
          return
        case 'invalid': return input.problem
      }
    },
    gone (reason) {
      if (session === undefined || session.finished || stopped) return
      if (reason === 'protocol_error') {
        stopped = true
        return session.hangup(reason)
      }
      if (forwarding) return
      // The stream is gone without Twilio's `stop`: the call ends, and Twilio is told so that no caller waits in silence.
      stopped = true
      const held = session
      log.warn({ callId: held.call.id, reason }, 'the media stream dropped; the call ends')
      held.hangup(reason)
      void callTwilio(deps, held.call).then((twilio) => twilio?.calls.update(callSid!, { Status: 'completed' }))
        .catch((err: unknown) => log.warn({ err, callId: held.call.id }, 'Twilio could not be told to hang up a dropped call'))
    },
    dropped: 'stream_dropped'
  }, { timeoutMs, startTimeoutMs, started, refused: (problem) => log.warn({ problem }, 'media stream refused') })

  const open = async (start: { streamSid: string, callSid: string, parameters: Record<string, string> }) => {
    const token = start.parameters.token ?? ''
    const opened = token === '' ? undefined : await takeStreamToken(deps.db, hashToken(token))
    if (opened === undefined) return loop.refuse(CLOSE.forbidden, 'invalid_stream_token', 'the stream token is unknown, spent or expired, or its call has ended')
    const { call, resume } = opened
    // The token is the call's: its stream belongs to the same Twilio call (an outbound call's id may not be stored yet).
    if (call.carrier_call_id !== start.callSid && !await setCarrierCallId(deps.db, call.id, start.callSid)) {
      return loop.refuse(CLOSE.forbidden, 'invalid_stream_token', 'the stream token belongs to another call')
    }
    callSid = start.callSid
    const forward = async (request: ForwardRequest) => {
      // The agent's last words are played before the stream stops.
      await transport!.drain()
      forwarding = true
      try {
        await forwardCall(deps, call, start.callSid, request)
      } catch (err) {
        forwarding = false
        throw err
      }
    }
    const keys = async (digits: string, state: Conversation) => {
      // What the agent said before is played first; the call update then stops this stream.
      await transport!.drain()
      forwarding = true
      try {
        await sendKeys(deps, call, start.callSid, digits, state)
      } catch (err) {
        forwarding = false
        throw err
      }
    }
    transport = twilioTransport(socket, loop, start.streamSid, forward, keys)
    session = Session.open(deps, call, transport, { resume })
    for (const pcm of opening) session.audio(pcm)
    opening = []
    live.add(session)
    loop.attach()
  }
}
