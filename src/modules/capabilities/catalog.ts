import type { CapabilityTable } from '../agents/queries.ts'
import type { CapabilityType } from './registry.ts'
import { agentTransfer } from './types/agent-transfer.ts'
import { apiCall } from './types/api-call.ts'
import { apiRag } from './types/api-rag.ts'
import { callForwarding } from './types/call-forwarding.ts'
import { endCall } from './types/end-call.ts'
import { doNotCall } from './types/do-not-call.ts'
import { appointmentBooking } from './types/appointment-booking.ts'
import { bookingOne } from './types/booking-one.ts'
import { bookingTwo } from './types/booking-two.ts'
import { calendarOne } from './types/calendar-one.ts'
import { calendarTwo } from './types/calendar-two.ts'
import { crm } from './types/crm.ts'
import { mcp } from './types/mcp.ts'
import { sendChat, sendEmail, sendSms } from './types/messages.ts'
import { sendDtmf } from './types/send-dtmf.ts'

// The catalogue: every action and tool type, in the specification's order. Actions and tools are the same resource
// twice (a typed `settings` object under an agent), told apart by a descriptor.

export interface Kind extends CapabilityTable {
  path: 'actions' | 'tools'
  idParam: 'agentActionId' | 'agentToolId'
  noun: 'action' | 'tool'
  /** Most an agent may have: each action is a delivery per call, each tool a prompt and a round trip per turn. */
  max: number
  types: Record<string, CapabilityType>
}

export const ACTIONS: Kind = {
  table: 'agent_actions',
  typeColumn: 'action_type',
  path: 'actions',
  idParam: 'agentActionId',
  noun: 'action',
  max: 20,
  types: { send_email: sendEmail, send_sms: sendSms, send_chat: sendChat, api_call: apiCall }
}

export const TOOLS: Kind = {
  table: 'agent_tools',
  typeColumn: 'tool_type',
  path: 'tools',
  idParam: 'agentToolId',
  noun: 'tool',
  max: 30,
  types: {
    api_rag: apiRag,
    appointment_booking: appointmentBooking,
    call_forwarding: callForwarding,
    end_call: endCall,
    calendar_one: calendarOne,
    calendar_two: calendarTwo,
    booking_one: bookingOne,
    booking_two: bookingTwo,
    crm,
    agent_transfer: agentTransfer,
    mcp,
    send_dtmf: sendDtmf,
    do_not_call: doNotCall
  }
}
