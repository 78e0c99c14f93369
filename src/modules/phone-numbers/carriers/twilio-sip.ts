import { CarrierError, type NumberWebhooks } from './carrier.ts'
import type { TwilioRequest } from './twilio.ts'

// The Twilio side of a number connected to a SIP trunk (connect-to-sip, docs/sip.md): a Programmable Voice SIP Domain
// per number, which the PBX sends the number's calls to. Twilio authenticates the PBX's INVITE with the credential
// list mapped to the domain, then requests TwiML from the domain's voice_url: this server's voice webhook, as for a
// Twilio number. Written from Twilio's references:
// https://www.twilio.com/docs/voice/sip/api/sip-domain-resource (a domain must map an auth method, else calls are blocked)
// https://www.twilio.com/docs/voice/sip/api/sip-credentiallist-resource (at most 100 lists per account)
// https://www.twilio.com/docs/voice/sip/api/sip-credential-resource (username up to 32 characters; password 12+, a digit, mixed case)
// https://www.twilio.com/docs/voice/sip/api/sip-credentiallistmapping-resource (Auth/Calls/CredentialListMappings)
// Elastic SIP Trunking is not this route: a trunk's calls go to its Origination URIs (SIP), never to a webhook that
// answers TwiML (https://www.twilio.com/docs/sip-trunking, "Origination settings"), so no media stream could reach us.

/** What Twilio keeps for one SIP number: its domain and the credential list mapped to it. */
export interface SipDomain { domainSid: string, credentialListSid: string }

export interface SipCredentials { username: string, password: string }

/** Twilio's rules for a SIP credential (the Credential resource's Username and Password). */
export function sipCredentialProblem (credentials: SipCredentials): string | undefined {
  if (credentials.username.length > 32) return 'body.sip_trunk_auth_username must be at most 32 characters (Twilio\'s SIP credentials)'
  const { password } = credentials
  if (password.length < 12 || !/\d/.test(password) || !/[a-z]/.test(password) || !/[A-Z]/.test(password)) {
    return 'body.sip_trunk_auth_password must have at least 12 characters with a digit, an upper-case and a lower-case letter: the PBX authenticates to Twilio with it, and Twilio takes no weaker password'
  }
  return undefined
}

/** The domain name of a number's SIP Domain: its id is unique, and the name must end in sip.twilio.com. */
export const sipDomainName = (numberId: string) => `sb-${numberId}.sip.twilio.com`

export interface TwilioSip {
  readonly name: 'twilio'
  readonly accountId: string
  /** Makes the number's domain (or, given `existing`, points it here again and replaces its credentials). */
  connect: (numberId: string, credentials: SipCredentials, hooks: NumberWebhooks, existing?: SipDomain) => Promise<SipDomain>
  /** Points the domain's voice URL and status callback at `hooks` (PUBLIC_BASE_URL changed). */
  repoint: (domainSid: string, hooks: NumberWebhooks) => Promise<void>
  /** Deletes the domain and its credential list; what Twilio no longer knows counts as deleted. */
  disconnect: (domain: SipDomain) => Promise<void>
}

interface Created { sid?: string }

export function createTwilioSip (accountId: string, request: TwilioRequest): TwilioSip {
  const created = async (path: string, form: Record<string, string>): Promise<Created & { sid: string }> => {
    const body = await request<Created>('POST', path, form)
    if (body?.sid === undefined) throw new CarrierError('failed', `Twilio answered ${path} without a sid`)
    return { ...body, sid: body.sid }
  }
  const voiceFields = (hooks: NumberWebhooks) => ({
    VoiceUrl: hooks.voiceUrl, VoiceMethod: 'POST', VoiceStatusCallbackUrl: hooks.statusCallback, VoiceStatusCallbackMethod: 'POST'
  })

  /** A credential list holding the one credential, mapped to the domain for its calls. */
  async function credentialList (numberId: string, domainSid: string, credentials: SipCredentials): Promise<string> {
    const list = await created('/SIP/CredentialLists.json', { FriendlyName: `switchboard ${numberId}` })
    try {
      await created(`/SIP/CredentialLists/${list.sid}/Credentials.json`, { Username: credentials.username, Password: credentials.password })
      await created(`/SIP/Domains/${domainSid}/Auth/Calls/CredentialListMappings.json`, { CredentialListSid: list.sid })
    } catch (err) {
      await request('DELETE', `/SIP/CredentialLists/${list.sid}.json`).catch(() => undefined)
      throw err
    }
    return list.sid
  }

  async function disconnect (domain: SipDomain): Promise<void> {
    await request('DELETE', `/SIP/Domains/${encodeURIComponent(domain.domainSid)}.json`)
    await request('DELETE', `/SIP/CredentialLists/${encodeURIComponent(domain.credentialListSid)}.json`)
  }

  return {
    name: 'twilio',
    accountId,
    async connect (numberId, credentials, hooks, existing) {
      if (existing !== undefined) {
        // New credentials are mapped before the old ones go, so that the PBX is never locked out meanwhile.
        await request('POST', `/SIP/Domains/${encodeURIComponent(existing.domainSid)}.json`, voiceFields(hooks))
        const credentialListSid = await credentialList(numberId, existing.domainSid, credentials)
        await request('DELETE', `/SIP/Domains/${existing.domainSid}/Auth/Calls/CredentialListMappings/${existing.credentialListSid}.json`)
        await request('DELETE', `/SIP/CredentialLists/${existing.credentialListSid}.json`)
        return { domainSid: existing.domainSid, credentialListSid }
      }
      const domain = await created('/SIP/Domains.json', { DomainName: sipDomainName(numberId), FriendlyName: `switchboard ${numberId}`, ...voiceFields(hooks) })
      try {
        const credentialListSid = await credentialList(numberId, domain.sid, credentials)
        return { domainSid: domain.sid, credentialListSid }
      } catch (err) {
        await request('DELETE', `/SIP/Domains/${domain.sid}.json`).catch(() => undefined)
        throw err
      }
    },
    async repoint (domainSid, hooks) {
      await created(`/SIP/Domains/${encodeURIComponent(domainSid)}.json`, voiceFields(hooks))
    },
    disconnect
  }
}
