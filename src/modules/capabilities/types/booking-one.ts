import { defineCapability } from '../registry.ts'
import { BOOKING_LABELS, NOT_YET, bookingSettings } from '../booking/settings.ts'

export const bookingOne = defineCapability({ type: 'booking_one', label: 'Booking (Cal.com)', hint: 'Books, reschedules and cancels in Cal.com.', schema: bookingSettings(), defaults: {}, fieldLabels: BOOKING_LABELS, unavailable: NOT_YET })
