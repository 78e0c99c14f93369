import { defineCapability } from '../registry.ts'
import { BOOKING_LABELS, NOT_YET, bookingSettings } from '../booking/settings.ts'

export const bookingTwo = defineCapability({ type: 'booking_two', label: 'Booking (Calendly)', hint: 'Books, reschedules and cancels in Calendly.', schema: bookingSettings(), defaults: {}, fieldLabels: BOOKING_LABELS, unavailable: NOT_YET })
