import type { DeliveryRow } from '../deliveries/queries.ts'
import { ACTIONS } from '../capabilities/catalog.ts'
import type { MessageRow } from '../messaging/queries.ts'
import { html, type SafeHtml } from './html.ts'
import { when } from './pages.ts'

// What the call and contact pages show of messages, and how every page names a delivery's kind.

const CHANNELS = { email: 'E-mail', sms: 'SMS', chat: 'WhatsApp' } as const

/** A delivery's kind in words: the webhook, or the label of the action type behind it. */
export const deliveryKind = (row: Pick<DeliveryRow, 'kind'>) => row.kind === 'agent_webhook' ? 'Webhook' : ACTIONS.types[row.kind]?.label ?? row.kind

/** A table of messages (newest first as given): channel, recipient, status, error, time. */
export function messagesTable (messages: MessageRow[], caption: string): SafeHtml {
  return html`<div class="table"><table>
  <caption>${caption}</caption>
  <thead><tr><th scope="col">Channel</th><th scope="col">To</th><th scope="col">Status</th><th scope="col">Error</th><th scope="col">Time</th></tr></thead>
  <tbody>${messages.map((row) => html`<tr><td>${CHANNELS[row.channel]}</td><td>${row.recipient}</td><td>${row.status}</td><td>${row.error ?? '—'}</td><td>${when(row.created_at)}</td></tr>`)}</tbody>
</table></div>`
}
