import type { ProviderInfo } from '../types.ts'

/**
 * Microsoft Outlook calendars through Microsoft Graph v1.0, OAuth 2.0 only (the Microsoft identity platform's v2.0
 * endpoints). `offline_access` brings the refresh token; Graph's scopes are named without their resource prefix.
 */
export const calendarTwo: ProviderInfo = {
  provider: 'calendar_two',
  service: 'Microsoft Outlook',
  methods: ['oauth'],
  scopes: ['offline_access', 'User.Read', 'Calendars.ReadWrite'],
  // People often have a work and a personal Microsoft account signed in: let them choose which one to connect.
  authorizeParams: { prompt: 'select_account' },
  // GET /me: the display name with the mailbox address, or the sign-in name when the account has no mailbox address.
  account: async (conn, signal) => {
    const me = (await conn.request({ method: 'GET', path: '/me', query: { $select: 'displayName,mail,userPrincipalName' } }, signal)).body
    const address = typeof me?.mail === 'string' && me.mail !== '' ? me.mail : typeof me?.userPrincipalName === 'string' ? me.userPrincipalName : ''
    const name = typeof me?.displayName === 'string' ? me.displayName : ''
    return name === '' ? address : address === '' ? name : `${name} (${address})`
  }
}
