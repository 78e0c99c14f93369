import type { Config } from '../../../config.ts'
import type { DB } from '../../../db/database.ts'
import type { CallRow } from '../../../db/schema.ts'
import { CarrierError } from '../../phone-numbers/carriers/carrier.ts'
import { TELNYX_WEBHOOKS, telnyxRequester, type TelnyxAccount, type TelnyxRequest } from '../../phone-numbers/carriers/telnyx.ts'
import { callNumber, tenantTelnyxAccount } from '../../phone-numbers/number-accounts.ts'

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

/** What `client_state` carries: our call, and whether the webhook is about the leg a forwarding dialled. */
export interface ClientState { call_id: string, leg?: 'transfer' }

export const encodeClientState = (state: ClientState): string => Buffer.from(JSON.stringify(state)).toString('base64')

export function decodeClientState (value: unknown): ClientState | undefined {
  if (typeof value !== 'string' || value.length > 1000) return undefined
  try {
    const state = JSON.parse(Buffer.from(value, 'base64').toString('utf8')) as Partial<ClientState>
    return typeof state.call_id === 'string' && /^[0-9a-f]{24}$/.test(state.call_id) ? { call_id: state.call_id, ...(state.leg === 'transfer' && { leg: 'transfer' }) } : undefined
  } catch {
    return undefined
  }
}

export function telnyxCalls (request: TelnyxRequest) {
  const action = async (callControlId: string, command: string, body: Record<string, unknown> = {}): Promise<void> => {
    await request('POST', `/calls/${encodeURIComponent(callControlId)}/actions/${command}`, body)
  }
  return {
    /** Rings `to` for up to `timeoutSeconds`; the answered call streams to us; its events come to `webhookUrl`. */
    async dial (call: { connectionId: string, to: string, from: string, timeoutSeconds: number, webhookUrl: string, clientState: ClientState, stream: StreamRequest }): Promise<string> {
      const dialled = await request<{ data?: { call_control_id?: string } }>('POST', '/calls', {
        connection_id: call.connectionId,
        to: call.to,
        from: call.from,
        timeout_secs: call.timeoutSeconds,
        webhook_url: call.webhookUrl,
        client_state: encodeClientState(call.clientState),
        ...streamFields(call.stream)
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
    async transfer (id: string, transfer: { to: string, from: string, timeoutSeconds: number, clientState: ClientState }): Promise<void> {
      await action(id, 'transfer', {
        to: transfer.to,
        from: transfer.from,
        // Telnyx takes 5 to 600 seconds.
        timeout_secs: Math.min(600, Math.max(5, transfer.timeoutSeconds)),
        target_leg_client_state: encodeClientState(transfer.clientState)
      })
    }
  }
}

export type TelnyxCalls = ReturnType<typeof telnyxCalls>

/** The installation's Telnyx account (TELNYX_*), which holds every Telnyx number not imported by a tenant from its own account; undefined without one. */
export function telnyxAccount (config: Pick<Config, 'telnyx'>): TelnyxAccount | undefined {
  const { apiUrl, apiKey, connectionId } = config.telnyx
  return apiKey === undefined || connectionId === undefined ? undefined : { apiUrl, apiKey, connectionId }
}

/**
 * Call Control for a call on a Telnyx number, through the account holding the number (a tenant's own, with its key,
 * or the installation's), and where that account's webhooks come (`webhookUrl`); undefined when its number is gone,
 * is not Telnyx's, or its account is not configured.
 */
export async function callTelnyx (deps: { db: DB, config: Pick<Config, 'telnyx' | 'publicBaseUrl'> }, call: CallRow) {
  const number = await callNumber(deps.db, call)
  if (number?.carrier !== 'telnyx') return undefined
  const tenant = tenantTelnyxAccount(deps.config.telnyx.apiUrl, number)
  const account = tenant ?? telnyxAccount(deps.config)
  if (account === undefined) return undefined
  const request = tenant === undefined ? telnyxRequester(account) : telnyxRequester(account, 'the Telnyx API key kept with the number')
  const webhookUrl = deps.config.publicBaseUrl + (tenant?.webhookPath ?? TELNYX_WEBHOOKS.webhook)
  return { number, connectionId: account.connectionId, webhookUrl, calls: telnyxCalls(request) }
}
