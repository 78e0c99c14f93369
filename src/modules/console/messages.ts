import type { DeliveryRow } from '../deliveries/queries.ts'
import { ACTIONS } from '../capabilities/catalog.ts'
import type { MessageRow } from '../messaging/queries.ts'
import { dataTable, type Column } from './components.ts'
import type { SafeHtml } from './html.ts'
import { when } from './pages.ts'

// What the call and contact pages show of messages, and how every page names a delivery's kind.

const CHANNELS = { email: 'E-mail', sms: 'SMS', chat: 'WhatsApp' } as const

/** A delivery's kind in words: the webhook, or the label of the action type behind it. */
export const deliveryKind = (row: Pick<DeliveryRow, 'kind'>) => row.kind === 'agent_webhook' ? 'Webhook' : ACTIONS.types[row.kind]?.label ?? row.kind

const STATUSES: Record<MessageRow['status'], string> = { sending: 'Sending', sent: 'Sent', recorded: 'Recorded', failed: 'Failed', refused: 'Refused' }

const MESSAGE_COLUMNS: Array<Column<MessageRow>> = [
  { header: 'Channel', cell: (row) => CHANNELS[row.channel] },
  { header: 'To', cell: (row) => row.recipient },
  { header: 'Status', cell: (row) => STATUSES[row.status] },
  { header: 'Error', cell: (row) => row.error ?? '—' },
  { header: 'Time', cell: (row) => when(row.created_at) }
]

/** A table of messages (newest first as given): channel, recipient, status, error, time. */
export const messagesTable = (messages: MessageRow[], caption: string): SafeHtml =>
  dataTable({ caption, columns: MESSAGE_COLUMNS, rows: messages, empty: 'No messages.' })
