import { defineCapability } from '../registry.ts'
import { BOOKING_LABELS, NOT_YET, calendarSettings } from '../booking/settings.ts'

export const calendarTwo = defineCapability({ type: 'calendar_two', label: 'Calendar (Microsoft Outlook)', hint: 'Checks and books times in an Outlook calendar.', schema: calendarSettings(), defaults: {}, fieldLabels: BOOKING_LABELS, unavailable: NOT_YET })
