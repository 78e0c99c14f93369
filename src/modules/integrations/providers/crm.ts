import type { ProviderInfo } from '../providers.ts'

/** HubSpot (CRM v3), with a private app's token or OAuth 2.0. */
export const crm: ProviderInfo = {
  provider: 'crm',
  service: 'HubSpot',
  methods: ['api_key', 'oauth'],
  scopes: ['crm.objects.contacts.read', 'crm.objects.contacts.write'],
  account: async (conn, signal) => {
    const details = (await conn.request({ method: 'GET', path: '/account-info/v3/details' }, signal)).body
    return details?.portalId === undefined ? '' : `HubSpot account ${String(details.portalId)}`
  }
}
