import type { ProviderInfo } from '../types.ts'

/** Cal.com (API v2), with an API key. */
export const bookingOne: ProviderInfo = {
  provider: 'booking_one',
  service: 'Cal.com',
  methods: ['api_key'],
  scopes: [],
  account: async (conn, signal) => {
    const me = (await conn.request({ method: 'GET', path: '/me' }, signal)).body?.data
    return String(me?.email ?? me?.username ?? '')
  }
}
