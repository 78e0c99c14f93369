import type { Config } from '../../../config.ts'
import type { DB } from '../../../db/database.ts'
import type { CallRow } from '../../../db/schema.ts'
import { CarrierError } from '../../phone-numbers/carriers/carrier.ts'
import { TELNYX_WEBHOOKS, telnyxRequester, type TelnyxAccount, type TelnyxRequest } from '../../phone-numbers/carriers/telnyx.ts'
import { callNumber, sipTrunkOf, tenantTelnyxAccount } from '../../phone-numbers/number-accounts.ts'

// Telnyx's Call Control commands (developers.telnyx.com/api-reference/call-commands; shapes from team-telnyx/telnyx-node
// src/resources/calls): POST /v2/calls dials, POST /v2/calls/{call_control_id}/actions/<command> acts on a live call.
// `client_state` (base64) comes back in every later webhook of the call: it names our call before Telnyx's id is stored.

/** How this server's media stream is asked for: the caller's side only, µ-law 8 kHz both ways (bidirectional RTP). */
export interface StreamRequest { url: string, token: string }

const streamFields = (stream: StreamRequest) => ({
  stream_url: stream.url,
  // Sent back as the x-telnyx-streaming-auth-token header and in the `connected` frame (the WebSocket reference).
  stream_auth_token: stream.token,
  stream_track: 'inbound_track',
  stream_codec: 'PCMU',
  stream_bidirectional_mode: 'rtp',
  stream_bidirectional_codec: 'PCMU'
})

/** What `client_state` carries: our call, and whether the webhook is about the leg a forwarding dialled (a blind transfer's, or a warm transfer's call to the person). */
export interface ClientState { call_id: string, leg?: 'transfer' | 'warm' }

const LEGS = new Set(['transfer', 'warm'])

export const encodeClientState = (state: ClientState): string => Buffer.from(JSON.stringify(state)).toString('base64')

export function decodeClientState (value: unknown): ClientState | undefined {
  if (typeof value !== 'string' || value.length > 1000) return undefined
  try {
    const state = JSON.parse(Buffer.from(value, 'base64').toString('utf8')) as Partial<ClientState>
    return typeof state.call_id === 'string' && /^[0-9a-f]{24}$/.test(state.call_id) ? { call_id: state.call_id, ...(state.leg !== undefined && LEGS.has(state.leg) && { leg: state.leg }) } : undefined
  } catch {
    return undefined
  }
}

/**
 * A call to a SIP trunk's PBX (a SIP number's calls, docs/sip.md): the credentials answer the PBX's challenge
 * (`sip_auth_username`, `sip_auth_password`) and the transport is Telnyx's `sip_transport_protocol` (UDP, TCP, TLS), as
 * POST /v2/calls and the transfer command take them (telnyx-node src/resources/calls/calls.ts, calls/actions.ts).
 */
export interface SipDial { username?: string, password?: string, transport?: 'UDP' | 'TCP' | 'TLS' }

const sipFields = (sip: SipDial | undefined) => sip === undefined
  ? {}
  : {
      ...(sip.username !== undefined && { sip_auth_username: sip.username }),
      ...(sip.password !== undefined && { sip_auth_password: sip.password }),
      ...(sip.transport !== undefined && { sip_transport_protocol: sip.transport })
    }

// --- Answering-machine detection (docs/voice.md, "Voicemail") ---

/** Detection on a dialled call: how long Telnyx may take to tell, and again to hear a machine's greeting end. */
export interface MachineDetection { timeoutSeconds: number }

/**
 * Telnyx's standard detection in its `greeting_end` setting: call.machine.detection.ended says human, machine or
 * not_sure, and for a machine call.machine.greeting.ended follows once its greeting ended with a beep or silence
 * (the moment a message is left, as Twilio's DetectMessageEnd). `total_analysis_time_millis` bounds the first verdict,
 * `greeting_total_analysis_time_millis` the wait for the greeting's end.
 * https://developers.telnyx.com/docs/voice/programmable-voice/answering-machine-detection; the field shapes from
 * team-telnyx/telnyx-node src/resources/calls/calls.ts (CallDialParams.AnsweringMachineDetectionConfig).
 */
const machineDetectionFields = (detection: MachineDetection) => ({
  answering_machine_detection: 'greeting_end',
  answering_machine_detection_config: {
    total_analysis_time_millis: detection.timeoutSeconds * 1000,
    greeting_total_analysis_time_millis: detection.timeoutSeconds * 1000
  }
})

// --- end of answering-machine detection ---

export function telnyxCalls (request: TelnyxRequest) {
  const action = async (callControlId: string, command: string, body: Record<string, unknown> = {}): Promise<void> => {
    await request('POST', `/calls/${encodeURIComponent(callControlId)}/actions/${command}`, body)
  }
  return {
    /**
     * Rings `to` for up to `timeoutSeconds`; the answered call streams to us (unless no `stream`); its events come to
     * `webhookUrl`. With `machineDetection`, Telnyx's answering-machine detection runs on the answered call
     * (machineDetectionFields).
     */
    async dial (call: { connectionId: string, to: string, from: string, timeoutSeconds: number, webhookUrl: string, clientState: ClientState, stream?: StreamRequest, sip?: SipDial, machineDetection?: MachineDetection }): Promise<string> {
      const dialled = await request<{ data?: { call_control_id?: string } }>('POST', '/calls', {
        connection_id: call.connectionId,
        to: call.to,
        from: call.from,
        ...sipFields(call.sip),
        timeout_secs: call.timeoutSeconds,
        webhook_url: call.webhookUrl,
        client_state: encodeClientState(call.clientState),
        ...(call.stream !== undefined && streamFields(call.stream)),
        ...(call.machineDetection !== undefined && machineDetectionFields(call.machineDetection))
      })
      const id = dialled?.data?.call_control_id
      if (typeof id !== 'string') throw new CarrierError('failed', 'Telnyx answered the dial without the call_control_id')
      return id
    },
    answer: async (id: string, clientState: ClientState) => { await action(id, 'answer', { client_state: encodeClientState(clientState) }) },
    /** Refuses an incoming call before it is answered. */
    reject: async (id: string) => { await action(id, 'reject', { cause: 'CALL_REJECTED' }) },
    hangup: async (id: string) => { await action(id, 'hangup') },
    streamingStart: async (id: string, stream: StreamRequest) => { await action(id, 'streaming_start', streamFields(stream)) },
    streamingStop: async (id: string) => { await action(id, 'streaming_stop') },
    /** Plays keypad tones on the call, which stays on its stream (https://developers.telnyx.com/api-reference/call-commands/send-dtmf; `w`: half a second). */
    sendDtmf: async (id: string, digits: string) => { await action(id, 'send_dtmf', { digits }) },
    /**
     * Rings `to` and bridges the call to it when answered (transfer-call). Unanswered, Telnyx hangs the new leg up
     * (its call.hangup says why) and our call stays, to be taken back.
     */
    async transfer (id: string, transfer: { to: string, from: string, timeoutSeconds: number, clientState: ClientState, sip?: SipDial }): Promise<void> {
      await action(id, 'transfer', {
        to: transfer.to,
        from: transfer.from,
        ...sipFields(transfer.sip),
        // Telnyx takes 5 to 600 seconds.
        timeout_secs: Math.min(600, Math.max(5, transfer.timeoutSeconds)),
        target_leg_client_state: encodeClientState(transfer.clientState)
      })
    },

    // Warm transfers (telnyx/warm.ts).
    /** Plays a WAV or MP3 on the call, looped until playback_stop (https://developers.telnyx.com/api-reference/call-commands/play-audio-url). */
    playbackStart: async (id: string, audioUrl: string) => { await action(id, 'playback_start', { audio_url: audioUrl, loop: 'infinity' }) },
    playbackStop: async (id: string) => { await action(id, 'playback_stop', { stop: 'all' }) },
    /**
     * Speaks `text` and gathers one key, reported by call.gather.ended (`digits`, `status`):
     * https://developers.telnyx.com/api-reference/call-commands/gather-using-speak. Said once (maximum_tries 1), then
     * `timeoutMs` for the key; any key is valid, so that the answer says which one came.
     */
    gatherUsingSpeak: async (id: string, gather: { text: string, voice: string, timeoutMs: number }) => {
      await action(id, 'gather_using_speak', {
        payload: gather.text, payload_type: 'text', voice: gather.voice, minimum_digits: 1, maximum_digits: 1, maximum_tries: 1, timeout_millis: gather.timeoutMs, valid_digits: '0123456789*#'
      })
    },
    /** Connects the two calls (https://developers.telnyx.com/api-reference/call-commands/bridge-calls): either hanging up hangs up the other. */
    bridge: async (id: string, otherId: string) => { await action(id, 'bridge', { call_control_id: otherId }) }
  }
}

export type TelnyxCalls = ReturnType<typeof telnyxCalls>

/** The installation's Telnyx account (TELNYX_*), which holds every Telnyx number not imported by a tenant from its own account; undefined without one. */
export function telnyxAccount (config: Pick<Config, 'telnyx'>): TelnyxAccount | undefined {
  const { apiUrl, apiKey, connectionId } = config.telnyx
  return apiKey === undefined || connectionId === undefined ? undefined : { apiUrl, apiKey, connectionId }
}

/**
 * Call Control for a call on a Telnyx number, or on a SIP number carried by Telnyx (with its trunk: where and how the
 * agent's calls reach the PBX), through the account holding the number (a tenant's own, with its key, or the
 * installation's), and where that account's webhooks come (`webhookUrl`); undefined when its number is gone, is not
 * Telnyx's, or its account is not configured.
 */
export async function callTelnyx (deps: { db: DB, config: Pick<Config, 'telnyx' | 'publicBaseUrl'> }, call: CallRow) {
  const number = await callNumber(deps.db, call)
  const sipNumber = number?.carrier === 'sip' && number.sip_carrier === 'telnyx'
  if (number === undefined || (number.carrier !== 'telnyx' && !sipNumber)) return undefined
  const trunk = sipTrunkOf(number)
  if (sipNumber && trunk === undefined) return undefined
  const tenant = tenantTelnyxAccount(deps.config.telnyx.apiUrl, number)
  const account = tenant ?? telnyxAccount(deps.config)
  if (account === undefined) return undefined
  const request = tenant === undefined ? telnyxRequester(account) : telnyxRequester(account, 'the Telnyx API key kept with the number')
  const webhookUrl = deps.config.publicBaseUrl + (tenant?.webhookPath ?? TELNYX_WEBHOOKS.webhook)
  return { number, trunk, connectionId: account.connectionId, webhookUrl, calls: telnyxCalls(request) }
}

/**
 * Where a call to `phoneNumber` goes: the number itself, or on a SIP number's call the PBX at its termination URI
 * (sip:<number>@<host:port>, its transport as Telnyx's sip_transport_protocol; a sips: trunk over TLS), with the trunk's credentials.
 */
export function telnyxTarget (trunk: ReturnType<typeof sipTrunkOf>, phoneNumber: string): { to: string, sip?: SipDial } {
  if (trunk === undefined) return { to: phoneNumber }
  const [, scheme = 'sip', rest] = /^(?:(sips?):)?(.*)$/i.exec(trunk.terminationUri)!
  const transport = /;transport=(udp|tcp|tls)/i.exec(rest)?.[1].toUpperCase() as SipDial['transport']
  const host = rest.replace(/;transport=[a-z]+/i, '')
  return { to: `sip:${phoneNumber}@${host}`, sip: { ...trunk.auth, transport: transport ?? (scheme.toLowerCase() === 'sips' ? 'TLS' : undefined) } }
}
