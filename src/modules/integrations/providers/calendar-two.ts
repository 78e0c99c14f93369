import type { ProviderInfo } from '../providers.ts'

/** Microsoft Outlook calendars through Microsoft Graph, OAuth 2.0 only. */
export const calendarTwo: ProviderInfo = {
  provider: 'calendar_two',
  service: 'Microsoft Outlook',
  methods: ['oauth'],
  scopes: ['offline_access', 'User.Read', 'Calendars.ReadWrite'],
  account: async (conn, signal) => {
    const me = (await conn.request({ method: 'GET', path: '/me' }, signal)).body
    return String(me?.mail ?? me?.userPrincipalName ?? me?.displayName ?? '')
  }
}
