import type { ProviderInfo } from '../types.ts'

/**
 * HubSpot (CRM v3), with a private app's access token (Settings → Integrations → Private apps) or OAuth 2.0 (a public
 * app's client: HUBSPOT_CLIENT_ID, HUBSPOT_CLIENT_SECRET). The scopes: the contacts' (which also cover the call and
 * note engagements logged on them), and `oauth`, which HubSpot's account-information API asks of OAuth tokens.
 */
export const crm: ProviderInfo = {
  provider: 'crm',
  service: 'HubSpot',
  methods: ['api_key', 'oauth'],
  scopes: ['oauth', 'crm.objects.contacts.read', 'crm.objects.contacts.write'],
  // GET /account-info/v3/details: { portalId, uiDomain, timeZone, … }; the portal (Hub) id is what HubSpot users know
  // their account by.
  account: async (conn, signal) => {
    const details = (await conn.request({ method: 'GET', path: '/account-info/v3/details' }, signal)).body
    return details?.portalId === undefined ? '' : `HubSpot account ${String(details.portalId)}`
  }
}
