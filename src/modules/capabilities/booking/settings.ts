import { Type } from 'typebox'
import { badRequest, HttpError } from '../../../http/errors.ts'
import { integrationOf } from '../../integrations/queries.ts'
import { PROVIDER_INFO, type Provider } from '../../integrations/providers.ts'
import type { CheckContext } from '../registry.ts'
import { Description, Minutes, Name, TimeZone } from '../../agents/settings-parts.ts'
import { CalendarMembers, hoursProblem, type OpeningHours } from './hours.ts'

// The settings the booking and calendar tools share.

/** A calendar in a connected account (Google, Outlook): events booked in it, free times from its busy times. */
export const calendarSettings = () => Type.Object({
  name: Name,
  description: Description,
  calendar_id: Type.String({ minLength: 1, maxLength: 200, description: 'calendar in the connected account ("primary": its main calendar)' }),
  time_zone: TimeZone,
  duration_minutes: Minutes(5, 480, 'length of an event'),
  ...CalendarMembers
})

/** An event type of a connected booking service (Cal.com, Calendly): its availability and length are the service's. */
export const bookingSettings = () => Type.Object({
  name: Name,
  description: Description,
  event_type_id: Type.String({ minLength: 1, maxLength: 200, description: 'event type in the connected booking account' }),
  time_zone: TimeZone
})

export const BOOKING_LABELS = { duration_minutes: 'Length (minutes)', calendar_id: 'Calendar id', event_type_id: 'Event type id', opening_hours: 'Opening hours', buffer_minutes: 'Buffer (minutes)', days_ahead: 'Days ahead', min_notice_minutes: 'Minimum notice (minutes)' }

/**
 * The check of a tool that acts in a connected account: an active one needs the account connected (and not revoked)
 * first, as the specification says of the booking tools; a tool switched off may be stored and set up before.
 */
export function requireConnection (provider: Provider): (ctx: CheckContext, settings: unknown, active: boolean) => Promise<void> {
  return async (ctx, _settings, active) => {
    if (!active) return
    const connection = await integrationOf(ctx.db, ctx.agent.user_id, provider)
    if (connection?.status === 'connected') return
    const service = PROVIDER_INFO[provider].service
    throw new HttpError(409, 'integration_not_connected', connection === undefined
      ? `${provider} tools act in a connected ${service} account: connect it first (PUT /v1/integrations/${provider}, or the console's Integrations page)`
      : `${service} refused this account's connection${connection.status_reason === null ? '' : ` (${connection.status_reason})`}: connect it again first (the console's Integrations page)`)
  }
}

/** Opening hours that a schema cannot refuse (a range that ends before it starts, overlapping ranges): 400. */
export function checkHours (settings: { opening_hours?: OpeningHours }): void {
  const problem = settings.opening_hours === undefined ? undefined : hoursProblem(settings.opening_hours)
  if (problem !== undefined) throw badRequest(`body.settings.${problem}`)
}

/** The check of a calendar in a connected account: its opening hours, and the connection when the tool is active. */
export function calendarCheck (provider: Provider): (ctx: CheckContext, settings: { opening_hours?: OpeningHours }, active: boolean) => Promise<void> {
  const connected = requireConnection(provider)
  return async (ctx, settings, active) => {
    checkHours(settings)
    await connected(ctx, settings, active)
  }
}
