import { randomBytes } from 'node:crypto'
import { CarrierError } from './carrier.ts'
import type { TelnyxRequest } from './telnyx.ts'
import type { SipCredentials, SipDomain } from './twilio-sip.ts'

// The Telnyx side of a number connected to a SIP trunk (connect-to-sip, docs/sip.md "Telnyx"), written from Telnyx's
// API v2 reference (shapes from team-telnyx/telnyx-node src/resources/call-control-applications.ts and
// credential-connections/credential-connections.ts):
// - a Call Control application per number, whose `inbound.sip_subdomain` takes SIP calls "in the same way a phone
//   number is used, from a SIP endpoint" (sip:<any alphanumeric user>@<subdomain>.sip.telnyx.com, no TLS), with
//   `sip_subdomain_receive_settings: only_my_connections` ("any connection assigned to the same Telnyx user") and
//   this server's webhook as `webhook_event_url`: the PBX's call arrives as call.initiated whose connection_id is the
//   application, hence the number (developers.telnyx.com/api-reference, Call Control Applications);
// - a credential connection per number holding the trunk's user_name and password (4-32 letters and digits; a
//   password of 8 to 128 characters), which the PBX authenticates its INVITEs to Telnyx with, so that the call counts
//   as one of "my connections" (https://developers.telnyx.com/api/sip-trunking/create-credential-connection). It has
//   no outbound voice profile: the PBX reaches the agent through it, never the phone network on this account.
// The subdomain is random, not the number's id: every connection of the installation's account may call every
// subdomain of it, so a tenant's PBX must not be able to name another tenant's.

/** What Telnyx keeps for one SIP number: domainSid is its Call Control application, credentialListSid its credential connection. */
export interface TelnyxSipDomain extends SipDomain { subdomain: string }

export interface TelnyxSip {
  readonly name: 'telnyx'
  readonly accountId: null
  /** Makes the number's application and credential connection (or, given `existing`, points the application here again and replaces the credentials in place). */
  connect: (numberId: string, credentials: SipCredentials, existing?: TelnyxSipDomain) => Promise<TelnyxSipDomain>
  /** Points the application's webhook here again (PUBLIC_BASE_URL changed). */
  repoint: (domain: TelnyxSipDomain, numberId: string) => Promise<void>
  /** Deletes the application and the credential connection; what Telnyx no longer knows counts as deleted. */
  disconnect: (domain: SipDomain) => Promise<void>
}

/** Telnyx's rules for a credential connection's user_name and password. */
export function telnyxSipCredentialProblem (credentials: SipCredentials): string | undefined {
  if (!/^[A-Za-z0-9]{4,32}$/.test(credentials.username)) return 'body.sip_trunk_auth_username must be 4 to 32 letters and digits (Telnyx\'s credential connections take no other user name)'
  if (credentials.password.length < 8 || credentials.password.length > 128) return 'body.sip_trunk_auth_password must have 8 to 128 characters (Telnyx\'s credential connections)'
  return undefined
}

/** The host a PBX sends a Telnyx SIP number's calls to. */
export const telnyxSipHost = (subdomain: string) => `${subdomain}.sip.telnyx.com`

export function createTelnyxSip (telnyx: TelnyxRequest, webhookUrl: string): TelnyxSip {
  // A 422 here is Telnyx refusing the trunk's settings (a user name taken, a subdomain in use), not a number no longer offered.
  const request: TelnyxRequest = async (method, path, body) => {
    try {
      return await telnyx(method, path, body)
    } catch (err) {
      if (err instanceof CarrierError && err.kind === 'unavailable') throw new CarrierError('rejected', err.message, err.carrierCode, err.status)
      throw err
    }
  }
  const created = async (path: string, body: Record<string, unknown>): Promise<string> => {
    const answer = await request<{ data?: { id?: string | number } }>('POST', path, body)
    const id = answer?.data?.id
    if (id === undefined || id === null) throw new CarrierError('failed', `Telnyx answered ${path} without an id`)
    return String(id)
  }
  const application = (numberId: string, subdomain: string) => ({
    application_name: `switchboard ${numberId}`,
    webhook_event_url: webhookUrl,
    webhook_api_version: '2',
    inbound: { sip_subdomain: subdomain, sip_subdomain_receive_settings: 'only_my_connections' }
  })
  const credentialFields = (numberId: string, credentials: SipCredentials) => ({
    connection_name: `switchboard ${numberId}`, user_name: credentials.username, password: credentials.password, active: true, sip_uri_calling_preference: 'disabled'
  })

  async function disconnect (domain: SipDomain): Promise<void> {
    await request('DELETE', `/call_control_applications/${encodeURIComponent(domain.domainSid)}`)
    await request('DELETE', `/credential_connections/${encodeURIComponent(domain.credentialListSid)}`)
  }

  return {
    name: 'telnyx',
    accountId: null,
    async connect (numberId, credentials, existing) {
      if (existing !== undefined) {
        // In place: the connection keeps working with the old credentials until Telnyx takes the new ones, so the PBX
        // is never without a way in; a user name Telnyx refuses leaves the old credentials as they were.
        await request('PATCH', `/call_control_applications/${encodeURIComponent(existing.domainSid)}`, application(numberId, existing.subdomain))
        await request('PATCH', `/credential_connections/${encodeURIComponent(existing.credentialListSid)}`, credentialFields(numberId, credentials))
        return { domainSid: existing.domainSid, credentialListSid: existing.credentialListSid, subdomain: existing.subdomain }
      }
      const subdomain = `sb${randomBytes(10).toString('hex')}`
      const applicationId = await created('/call_control_applications', application(numberId, subdomain))
      try {
        const credentialId = await created('/credential_connections', credentialFields(numberId, credentials))
        return { domainSid: applicationId, credentialListSid: credentialId, subdomain }
      } catch (err) {
        await request('DELETE', `/call_control_applications/${encodeURIComponent(applicationId)}`).catch(() => undefined)
        throw err
      }
    },
    async repoint (domain, numberId) {
      await request('PATCH', `/call_control_applications/${encodeURIComponent(domain.domainSid)}`, application(numberId, domain.subdomain))
    },
    disconnect
  }
}
