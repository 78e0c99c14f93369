import { defineCapability } from '../registry.ts'
import { BOOKING_LABELS, NOT_YET, calendarSettings } from '../booking/settings.ts'

export const calendarOne = defineCapability({ type: 'calendar_one', label: 'Calendar (Google Calendar)', hint: 'Checks and books times in a Google calendar.', schema: calendarSettings(), defaults: {}, fieldLabels: BOOKING_LABELS, unavailable: NOT_YET })
