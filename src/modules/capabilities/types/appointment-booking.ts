import { Type } from 'typebox'
import { Email } from '../../../http/schemas.ts'
import { defineCapability } from '../registry.ts'
import { Description, Minutes, Name, TimeZone } from '../schemas.ts'
import { CalendarMembers } from '../booking/hours.ts'
import { BOOKING_LABELS, NOT_YET } from '../booking/settings.ts'

export const appointmentBooking = defineCapability({
  type: 'appointment_booking',
  label: 'Appointment booking',
  hint: 'Books appointments in a built-in calendar.',
  schema: Type.Object({
    name: Name,
    description: Description,
    time_zone: TimeZone,
    duration_minutes: Minutes(5, 480, 'length of an appointment'),
    notify_email: Type.Optional(Type.Union([Email, Type.Null()], { description: 'told of every booking' })),
    ...CalendarMembers
  }),
  defaults: { notify_email: null },
  fieldLabels: BOOKING_LABELS,
  unavailable: NOT_YET
})
