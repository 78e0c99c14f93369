import type { ProviderInfo } from '../types.ts'

// Cal.com (booking_one): an API key (Settings → Developer → API keys, cal_live_…), sent as a bearer token. Cal.com's
// OAuth is for its platform customers only, so an API key is the one way in. The account check is GET /v2/me.
export const bookingOne: ProviderInfo = {
  provider: 'booking_one',
  service: 'Cal.com',
  methods: ['api_key'],
  scopes: [],
  account: async (conn, signal) => {
    const me = (await conn.request({ method: 'GET', path: '/me' }, signal)).body?.data
    return String(me?.name ?? '') || String(me?.username ?? '') || String(me?.email ?? '')
  }
}
