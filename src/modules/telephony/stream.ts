import type { WebSocket } from 'ws'
import { hashToken } from '../users/keys.ts'
import type { LiveCalls } from '../voice/live-calls.ts'
import { Session, type EndReason, type ForwardRequest } from '../voice/session.ts'
import { parseTwilioMessage, twilioTransport, type TwilioTransport } from '../voice/transports/twilio.ts'
import { callTwilio, forwardCall, type TelephonyDeps } from './calls.ts'
import { setCarrierCallId, takeStreamToken } from './queries.ts'

// One Twilio media stream: `start` names the call by its one-time token; media goes to the call's session
// until `stop` (the caller hung up, or a <Dial> took the call) or until the stream drops. A stream without a
// valid `start` within VOICE_STREAM_START_TIMEOUT_MS is closed: anyone can open one.

/** Close codes Twilio's side of the socket sees (Twilio then goes on with the TwiML after <Connect>: none, so it hangs up). */
const CLOSE = { forbidden: 4403, protocol: 4400, timeout: 4408 } as const

/** `started`: the stream is tied to its call (its token taken), so it no longer counts as pending (StreamAdmission). */
export function acceptTwilioStream (socket: WebSocket, deps: TelephonyDeps, live: LiveCalls, started: () => void): void {
  const { log } = deps
  const { streamTimeoutMs: timeoutMs, streamStartTimeoutMs } = deps.config.voice
  let session: Session | undefined
  let transport: TwilioTransport | undefined
  let callSid: string | undefined
  let starting = false
  let stopped = false
  /** A <Dial> is taking the call: the stream ending now is not the call ending. */
  let forwarding = false
  let heard = Date.now()

  /** The stream is gone without Twilio's `stop`: the call ends, and Twilio is told so that no caller waits in silence. */
  const dropped = (reason: EndReason) => {
    if (session === undefined || session.finished || stopped || forwarding) return
    stopped = true
    const held = session
    log.warn({ callId: held.call.id, reason }, 'the media stream dropped; the call ends')
    held.hangup(reason)
    if (socket.readyState === socket.OPEN) socket.terminate()
    void callTwilio(deps, held.call).then((twilio) => twilio?.calls.update(callSid!, { Status: 'completed' }))
      .catch((err: unknown) => log.warn({ err, callId: held.call.id }, 'Twilio could not be told to hang up a dropped call'))
  }
  // Twilio sends audio every 20 ms for the whole call, and answers pings: a stream silent on both is broken.
  const alive = setInterval(() => {
    if (Date.now() - heard > timeoutMs) dropped('stream_timeout')
    else if (socket.readyState === socket.OPEN) socket.ping()
  }, Math.max(50, Math.floor(timeoutMs / 3)))
  socket.on('pong', () => { heard = Date.now() })

  const startTimer = setTimeout(() => {
    if (session === undefined) refuse(CLOSE.timeout, `no valid start within ${streamStartTimeoutMs} ms`)
  }, streamStartTimeoutMs)

  const refuse = (code: number, problem: string) => {
    clearTimeout(startTimer)
    log.warn({ problem }, 'media stream refused')
    if (session !== undefined) {
      stopped = true
      session.hangup('protocol_error')
    }
    socket.close(code, problem.slice(0, 120))
  }

  const open = async (start: { streamSid: string, callSid: string, parameters: Record<string, string> }) => {
    const token = start.parameters.token ?? ''
    const opened = token === '' ? undefined : await takeStreamToken(deps.db, hashToken(token))
    if (opened === undefined) return refuse(CLOSE.forbidden, 'the stream token is unknown, spent or expired, or its call has ended')
    const { call, resume } = opened
    // The token is the call's: its stream belongs to the same Twilio call (an outbound call's id may not be stored yet).
    if (call.carrier_call_id !== start.callSid && !await setCarrierCallId(deps.db, call.id, start.callSid)) {
      return refuse(CLOSE.forbidden, 'the stream token belongs to another call')
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
    clearTimeout(startTimer)
    started()
    transport = twilioTransport(socket, start.streamSid, forward)
    session = Session.open(deps, call, transport, { resume })
    live.add(session)
    if (socket.readyState !== socket.OPEN) dropped('stream_dropped')
  }

  socket.on('message', (data: Buffer, isBinary: boolean) => {
    heard = Date.now()
    const input = parseTwilioMessage(data, isBinary)
    switch (input.kind) {
      case 'start':
        if (starting) return refuse(CLOSE.protocol, 'a second start')
        starting = true
        open(input).catch((err: unknown) => {
          log.error({ err }, 'the media stream could not open its call')
          refuse(CLOSE.protocol, 'the call could not be opened')
        })
        return
      case 'media': return session?.audio(input.pcm)
      case 'mark': return transport?.marked(input.name)
      case 'stop':
        stopped = true
        return session?.hangup('user_hangup')
      case 'invalid': return refuse(CLOSE.protocol, input.problem)
    }
  })
  // ws reports a message over maxPayload (and a broken frame) as an error, then closes.
  socket.on('error', () => refuse(CLOSE.protocol, 'the message was too large or malformed'))
  socket.on('close', () => {
    clearInterval(alive)
    clearTimeout(startTimer)
    dropped('stream_dropped')
  })
}
