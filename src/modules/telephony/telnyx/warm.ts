import type { CallRow } from '../../../db/schema.ts'
import { encodeWav } from '../../voice/audio.ts'
import type { ForwardRequest } from '../../voice/session.ts'
import type { TelephonyDeps } from '../calls.ts'
import { clearForwarding, holdForwarding, setWarmCallSid } from '../queries.ts'
import { announcement } from '../warm.ts'
import { telnyxTarget, type callTelnyx } from './commands.ts'

// Warm transfers on Telnyx numbers (docs/voice.md, "Warm transfer"). Telnyx has no TwiML and no conference is
// needed: the agent dials the person on a leg of its own (POST /v2/calls, client_state naming our call and leg
// 'warm'), stops the caller's stream and plays hold music on the caller's call (playback_start, looped) or leaves it
// silent. The leg's webhooks (telnyx/warm-legs.ts) go on: answered, the person hears the announcement and is asked for
// one key (gather_using_speak); 1 stops the music and bridges both calls; anything else, no answer, busy or failed
// hangs the leg up, and its call.hangup takes the caller back on a new stream (takeBackWarm + streaming_start).
// The carrier-neutral parts (the announcement, what accepts, the legs) are telephony/warm.ts's.

/** Where Telnyx fetches the hold music (it has none of its own): a short tune served by this server. */
export const HOLD_MUSIC_PATH = '/telephony/telnyx/hold-music.wav'

let tune: Buffer | undefined

/** The hold music: a soft arpeggio of 3 s (8 kHz, 16-bit WAV, as Telnyx plays), looped by playback_start. */
export function holdMusicWav (): Buffer {
  if (tune !== undefined) return tune
  const rate = 8000
  const noteSamples = rate / 2
  // C4 E4 G4 C5 G4 E4.
  const notes = [261.63, 329.63, 392, 523.25, 392, 329.63]
  const pcm = new Int16Array(notes.length * noteSamples)
  notes.forEach((hz, n) => {
    for (let i = 0; i < noteSamples; i++) {
      // Each note swells and fades, so that the loop has no clicks.
      const envelope = Math.sin(Math.PI * i / noteSamples) ** 2
      const t = i / rate
      pcm[n * noteSamples + i] = Math.round(6000 * envelope * (Math.sin(2 * Math.PI * hz * t) + 0.3 * Math.sin(4 * Math.PI * hz * t)))
    }
  })
  tune = encodeWav(pcm, rate)
  return tune
}

/**
 * The voice that speaks the announcement (gather_using_speak's `voice`): Amazon Polly neural voices of the languages
 * announcement() has lines in (a Polly voice sets its own language).
 */
export const announcementVoice = (language: string) => language.slice(0, 2).toLowerCase() === 'de' ? 'AWS.Polly.Vicki-Neural' : 'AWS.Polly.Joanna-Neural'

const SUMMARY_LIMIT = 2800

type Telnyx = NonNullable<Awaited<ReturnType<typeof callTelnyx>>>

/**
 * Starts a warm transfer on a Telnyx call: the person is dialled from the call's number, then the caller's stream
 * stops and the hold music starts. Throws (and keeps nothing, the person's leg hung up) when the dial or the stream's
 * stop fails, so that the agent keeps the caller; hold music that cannot start leaves the caller in silence.
 */
export async function warmTransferTelnyx (deps: TelephonyDeps, call: CallRow, callControlId: string, request: ForwardRequest, telnyx: Telnyx): Promise<void> {
  const { summary, holdMusic, language } = request.warm!
  // gather_using_speak says at most 3,000 characters: the summary is cut to leave room for the lines around it.
  const warm = { call_sid: null, accepted_at: null, announcement: { text: announcement(language, summary.slice(0, SUMMARY_LIMIT), true), language }, hold_music: holdMusic }
  if (!await holdForwarding(deps.db, call.id, { ...request.state, warm })) throw new Error('the call has ended')
  let leg: string | undefined
  try {
    leg = await telnyx.calls.dial({
      connectionId: telnyx.connectionId,
      // A SIP number's person is dialled through its PBX, as its outbound calls are (docs/sip.md).
      ...telnyxTarget(telnyx.trunk, request.phoneNumber),
      // The call's own number: show_caller_number does not apply (as on Twilio).
      from: telnyx.number.phone_number,
      timeoutSeconds: request.timeoutSeconds,
      webhookUrl: telnyx.webhookUrl,
      clientState: { call_id: call.id, leg: 'warm' }
    })
    await setWarmCallSid(deps.db, call.id, leg)
    // The agent is done with this stream; a take-back opens a new one.
    await telnyx.calls.streamingStop(callControlId)
  } catch (err) {
    await clearForwarding(deps.db, call.id)
    if (leg !== undefined) await telnyx.calls.hangup(leg).catch((hangup: unknown) => deps.log.warn({ err: hangup, callId: call.id }, 'the call to the person could not be hung up'))
    throw err
  }
  if (holdMusic) {
    await telnyx.calls.playbackStart(callControlId, deps.config.publicBaseUrl + HOLD_MUSIC_PATH)
      .catch((err: unknown) => deps.log.warn({ err, callId: call.id }, 'Telnyx could not play hold music; the caller waits in silence'))
  }
}
