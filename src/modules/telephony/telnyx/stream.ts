import type { WebSocket } from 'ws'
import { hashToken } from '../../users/keys.ts'
import type { LiveCalls } from '../../voice/live-calls.ts'
import { Session, type ForwardRequest } from '../../voice/session.ts'
import { CLOSE, SocketLoop } from '../../voice/socket-loop.ts'
import { parseTelnyxMessage, telnyxTransport, type TelnyxTransport } from '../../voice/transports/telnyx.ts'
import type { TelephonyDeps } from '../calls.ts'
import { setCarrierCallId, takeStreamToken } from '../queries.ts'
import { callTelnyx } from './commands.ts'
import { forwardTelnyxCall } from './forwarding.ts'

// One Telnyx media stream: the stream's auth token (stream_auth_token of the dial or streaming_start, sent back as
// the x-telnyx-streaming-auth-token header and in the `connected` frame) opens its call once, at `start`, which
// must name the same call (call_control_id). Media goes to the call's session until `stop` or until the stream
// drops; a stream without a valid `start` within VOICE_STREAM_START_TIMEOUT_MS is closed: anyone can open one.

export function acceptTelnyxStream (socket: WebSocket, headerToken: string | undefined, deps: TelephonyDeps, live: LiveCalls, started: () => void): void {
  const { log } = deps
  const { streamTimeoutMs: timeoutMs, streamStartTimeoutMs: startTimeoutMs } = deps.config.voice
  let token = headerToken
  let session: Session | undefined
  let transport: TelnyxTransport | undefined
  let callControlId: string | undefined
  let starting = false
  let stopped = false
  /** A transfer is taking the call: the stream ending now is not the call ending. */
  let forwarding = false

  const loop = new SocketLoop(socket, {
    receive (data, isBinary) {
      const input = parseTelnyxMessage(data, isBinary)
      switch (input.kind) {
        case 'connected':
          token ??= input.token
          return
        case 'start':
          if (starting) return 'a second start'
          starting = true
          open(input).catch((err: unknown) => {
            log.error({ err }, 'the media stream could not open its call')
            loop.fail('protocol_error', 'the call could not be opened')
          })
          return
        case 'media':
          session?.audio(input.pcm)
          return
        case 'mark':
          transport?.marked(input.name)
          return
        case 'stop':
          stopped = true
          session?.hangup('user_hangup')
          return
        case 'ignored': return
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
      // The stream is gone without Telnyx's `stop`: the call ends, and Telnyx hangs it up so that no caller waits in silence.
      stopped = true
      const held = session
      log.warn({ callId: held.call.id, reason }, 'the media stream dropped; the call ends')
      held.hangup(reason)
      void callTelnyx(deps, held.call).then((telnyx) => telnyx?.calls.hangup(callControlId!))
        .catch((err: unknown) => log.warn({ err, callId: held.call.id }, 'Telnyx could not be told to hang up a dropped call'))
    },
    dropped: 'stream_dropped'
  }, { timeoutMs, startTimeoutMs, started, refused: (problem) => log.warn({ problem }, 'Telnyx media stream refused') })

  const open = async (start: { callControlId: string }) => {
    const opened = token === undefined ? undefined : await takeStreamToken(deps.db, hashToken(token), 'telnyx')
    if (opened === undefined) return loop.refuse(CLOSE.forbidden, 'invalid_stream_token', 'the stream token is unknown, spent or expired, or its call has ended')
    const { call, resume } = opened
    // The token is the call's: its stream belongs to the same Telnyx call (an outbound call's id may not be stored yet).
    if (call.carrier_call_id !== start.callControlId && !await setCarrierCallId(deps.db, call.id, start.callControlId)) {
      return loop.refuse(CLOSE.forbidden, 'invalid_stream_token', 'the stream token belongs to another call')
    }
    callControlId = start.callControlId
    const forward = async (request: ForwardRequest) => {
      // The agent's last words are played before the stream stops.
      await transport!.drain()
      forwarding = true
      try {
        await forwardTelnyxCall(deps, call, start.callControlId, request)
      } catch (err) {
        forwarding = false
        throw err
      }
    }
    transport = telnyxTransport(socket, loop, forward)
    session = Session.open(deps, call, transport, { resume })
    live.add(session)
    loop.attach()
  }
}
