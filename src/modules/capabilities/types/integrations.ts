import { Type } from 'typebox'
import { Email } from '../../../http/schemas.ts'
import { defineCapability } from '../registry.ts'
import { Description, Minutes, Name, TimeZone } from '../schemas.ts'

// The booking, calendar and CRM tools of the specification. They do not act during calls yet (the next issue makes
// them act against Google Calendar, Microsoft Graph, Cal.com, Calendly, HubSpot and a built-in calendar), so they
// cannot be created: a tool that is stored and never acts would mislead whoever sets it. Rows stored before stay
// listed, marked as not acting, and can be deleted.

const NOT_YET = 'does not act during calls yet in this version of Switchboard, so it cannot be added (docs/agents.md, "Tools")'

const calendarSettings = () => Type.Object({
  name: Name,
  description: Description,
  calendar_id: Type.String({ minLength: 1, maxLength: 200, description: 'calendar in the connected account' }),
  time_zone: TimeZone,
  duration_minutes: Minutes(5, 480, 'length of an event')
})

const bookingSettings = () => Type.Object({
  name: Name,
  description: Description,
  event_type_id: Type.String({ minLength: 1, maxLength: 200, description: 'event type in the connected booking account' }),
  time_zone: TimeZone
})

const LABELS = { duration_minutes: 'Length (minutes)', calendar_id: 'Calendar id', event_type_id: 'Event type id' }

export const appointmentBooking = defineCapability({
  type: 'appointment_booking',
  label: 'Appointment booking',
  hint: 'Books appointments in a built-in calendar.',
  schema: Type.Object({
    name: Name,
    description: Description,
    time_zone: TimeZone,
    duration_minutes: Minutes(5, 480, 'length of an appointment'),
    notify_email: Type.Optional(Type.Union([Email, Type.Null()], { description: 'told of every booking' }))
  }),
  defaults: { notify_email: null },
  fieldLabels: LABELS,
  unavailable: NOT_YET
})

export const calendarOne = defineCapability({ type: 'calendar_one', label: 'Calendar (Google Calendar)', hint: 'Checks and books times in a Google calendar.', schema: calendarSettings(), defaults: {}, fieldLabels: LABELS, unavailable: NOT_YET })
export const calendarTwo = defineCapability({ type: 'calendar_two', label: 'Calendar (Microsoft Outlook)', hint: 'Checks and books times in an Outlook calendar.', schema: calendarSettings(), defaults: {}, fieldLabels: LABELS, unavailable: NOT_YET })
export const bookingOne = defineCapability({ type: 'booking_one', label: 'Booking (Cal.com)', hint: 'Books, reschedules and cancels in Cal.com.', schema: bookingSettings(), defaults: {}, fieldLabels: LABELS, unavailable: NOT_YET })
export const bookingTwo = defineCapability({ type: 'booking_two', label: 'Booking (Calendly)', hint: 'Books and cancels in Calendly.', schema: bookingSettings(), defaults: {}, fieldLabels: LABELS, unavailable: NOT_YET })

export const crm = defineCapability({
  type: 'crm',
  label: 'CRM (HubSpot)',
  hint: 'Looks up and updates the caller in HubSpot.',
  schema: Type.Object({
    name: Name,
    description: Description,
    operations: Type.Array(Type.Union([Type.Literal('lookup_contact'), Type.Literal('create_contact'), Type.Literal('update_contact'), Type.Literal('log_call')]), { minItems: 1, uniqueItems: true })
  }),
  defaults: {},
  unavailable: NOT_YET
})
