import type { ProviderInfo } from '../types.ts'

/** Calendly (API v2), with a personal access token or OAuth 2.0. */
export const bookingTwo: ProviderInfo = {
  provider: 'booking_two',
  service: 'Calendly',
  methods: ['api_key', 'oauth'],
  scopes: [],
  account: async (conn, signal) => {
    const me = (await conn.request({ method: 'GET', path: '/users/me' }, signal)).body?.resource
    return String(me?.email ?? me?.name ?? '')
  }
}
