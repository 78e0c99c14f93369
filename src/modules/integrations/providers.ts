import type { Config, IntegrationProvider, ProviderEndpoints } from '../../config.ts'
import type { Provider, ProviderInfo } from './types.ts'
import { bookingOne } from './providers/booking-one.ts'
import { bookingTwo } from './providers/booking-two.ts'
import { calendarOne } from './providers/calendar-one.ts'
import { calendarTwo } from './providers/calendar-two.ts'
import { crm } from './providers/crm.ts'

// The services behind the specification's neutral integration names (DESIGN.md, "Capabilities"): how an account
// connects to each, and the one cheap call that proves a connection works and names the account.

export const PROVIDERS = ['calendar_one', 'calendar_two', 'booking_one', 'booking_two', 'crm'] as const satisfies readonly IntegrationProvider[]
export type { AuthMethod, Provider, ProviderInfo } from './types.ts'

export const PROVIDER_INFO: Record<Provider, ProviderInfo> = {
  calendar_one: calendarOne,
  calendar_two: calendarTwo,
  booking_one: bookingOne,
  booking_two: bookingTwo,
  crm
}

export const endpointsOf = (config: Pick<Config, 'integrations'>, provider: Provider): ProviderEndpoints => config.integrations[provider]

/** Whether accounts can connect to the provider through OAuth on this installation (its client is configured). */
export function oauthConfigured (config: Pick<Config, 'integrations'>, provider: Provider): boolean {
  const endpoints = endpointsOf(config, provider)
  return PROVIDER_INFO[provider].methods.includes('oauth') && endpoints.clientId !== undefined && endpoints.authorize !== undefined && endpoints.token !== undefined
}
