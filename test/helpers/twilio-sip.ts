import { randomUUID } from 'node:crypto'
import { API_VERSION, errorBody, type LiveCall, type RestAnswer, sid, type SipCredentials, type TwilioVoice, type Webhook } from './twilio-voice.ts'

// Twilio's Programmable Voice SIP interface, as the server under test meets it (written from Twilio's references):
// SIP Domains (https://www.twilio.com/docs/voice/sip/api/sip-domain-resource), CredentialLists and their Credentials
// (…/sip-credentiallist-resource, …/sip-credential-resource), and the lists mapped to a domain for its calls
// (…/sip-credentiallistmapping-resource: /SIP/Domains/{sid}/Auth/Calls/CredentialListMappings). A PBX's INVITE to a
// domain is challenged; with credentials of a mapped list it reaches the domain's voice_url, signed, with To and From
// as SIP URIs and the SipDomain, SipDomainSid, SipUsername, SipCallId, SipSourceIp parameters
// (https://www.twilio.com/docs/voice/api/sip-twiml). A domain without a mapped auth method takes no calls.

export interface SipDomainRecord {
  sid: string
  account_sid: string
  domain_name: string
  friendly_name: string
  voice_url: string | null
  voice_method: string
  voice_status_callback_url: string | null
  /** Credential lists mapped for calls. */
  credentialLists: string[]
}

export interface CredentialListRecord { sid: string, account_sid: string, friendly_name: string, credentials: Array<SipCredentials & { sid: string }> }

/** How a PBX's INVITE ended: refused by Twilio (401/403/404, no webhook), or a call whose voice webhook was posted. */
export type SipInvite = { refused: 401 | 403 | 404 } | { refused?: undefined, call: LiveCall, webhook: Webhook }

const PASSWORD_RULE = (password: string) => password.length >= 12 && /\d/.test(password) && /[a-z]/.test(password) && /[A-Z]/.test(password)

export class TwilioSipStandIn {
  readonly domains: SipDomainRecord[] = []
  readonly lists: CredentialListRecord[] = []
  readonly #voice: TwilioVoice

  constructor (voice: TwilioVoice) { this.#voice = voice }

  #fail (status: number, code: number, message: string): RestAnswer { return { status, body: errorBody(status, code, message) } }
  #notFound (path: string): RestAnswer { return this.#fail(404, 20404, `The requested resource /${API_VERSION}/Accounts${path} was not found`) }

  #domainBody (d: SipDomainRecord) {
    const { credentialLists, ...fields } = d
    return { ...fields, api_version: API_VERSION, auth_type: credentialLists.length > 0 ? 'CREDENTIAL_LIST' : '', sip_registration: false, secure: false, uri: `/${API_VERSION}/Accounts/${d.account_sid}/SIP/Domains/${d.sid}.json` }
  }

  /** The SIP resources; undefined for paths that are not about SIP. */
  rest (method: string, accountSid: string, path: string, form: URLSearchParams): RestAnswer | undefined {
    if (!path.startsWith('/SIP/')) return undefined
    const domainFields = (d: SipDomainRecord) => {
      if (form.has('VoiceUrl')) d.voice_url = form.get('VoiceUrl')
      if (form.has('VoiceMethod')) d.voice_method = form.get('VoiceMethod')!
      if (form.has('VoiceStatusCallbackUrl')) d.voice_status_callback_url = form.get('VoiceStatusCallbackUrl')
      if (form.has('FriendlyName')) d.friendly_name = form.get('FriendlyName')!
    }
    if (path === '/SIP/Domains.json' && method === 'POST') {
      const name = form.get('DomainName') ?? ''
      if (!/^[A-Za-z0-9-]+\.sip\.twilio\.com$/.test(name)) return this.#fail(400, 21232, `DomainName ${name} must end with sip.twilio.com and hold only letters, digits and -`)
      if (this.domains.some((d) => d.domain_name === name)) return this.#fail(400, 21232, `The domain name ${name} is already in use`)
      const domain: SipDomainRecord = { sid: sid('SD'), account_sid: accountSid, domain_name: name, friendly_name: name, voice_url: null, voice_method: 'POST', voice_status_callback_url: null, credentialLists: [] }
      domainFields(domain)
      this.domains.push(domain)
      return { status: 201, body: this.#domainBody(domain) }
    }
    const domainPath = /^\/SIP\/Domains\/(SD[0-9a-f]{32})(\/.*)?\.json$/.exec(path)
    if (domainPath !== null) {
      const domain = this.domains.find((d) => d.sid === domainPath[1] && d.account_sid === accountSid)
      if (domain === undefined) return this.#notFound(`/${accountSid}${path}`)
      const sub = domainPath[2]
      if (sub === undefined) {
        if (method === 'POST') { domainFields(domain); return { status: 200, body: this.#domainBody(domain) } }
        if (method === 'GET') return { status: 200, body: this.#domainBody(domain) }
        if (method === 'DELETE') { this.domains.splice(this.domains.indexOf(domain), 1); return { status: 204, body: undefined } }
        return undefined
      }
      if (sub === '/Auth/Calls/CredentialListMappings' && method === 'POST') {
        const list = this.lists.find((l) => l.sid === form.get('CredentialListSid') && l.account_sid === accountSid)
        if (list === undefined) return this.#fail(400, 21240, 'CredentialListSid is not a credential list of this account')
        if (!domain.credentialLists.includes(list.sid)) domain.credentialLists.push(list.sid)
        return { status: 201, body: { sid: list.sid, account_sid: accountSid, friendly_name: list.friendly_name } }
      }
      const mapping = /^\/Auth\/Calls\/CredentialListMappings\/(CL[0-9a-f]{32})$/.exec(sub)
      if (mapping !== null && method === 'DELETE') {
        if (!domain.credentialLists.includes(mapping[1])) return this.#notFound(`/${accountSid}${path}`)
        domain.credentialLists = domain.credentialLists.filter((l) => l !== mapping[1])
        return { status: 204, body: undefined }
      }
      return undefined
    }
    if (path === '/SIP/CredentialLists.json' && method === 'POST') {
      const list = { sid: sid('CL'), account_sid: accountSid, friendly_name: form.get('FriendlyName') ?? '', credentials: [] }
      if (list.friendly_name === '') return this.#fail(400, 21100, 'FriendlyName is required')
      this.lists.push(list)
      return { status: 201, body: { sid: list.sid, account_sid: accountSid, friendly_name: list.friendly_name } }
    }
    const listPath = /^\/SIP\/CredentialLists\/(CL[0-9a-f]{32})(\/Credentials)?\.json$/.exec(path)
    if (listPath !== null) {
      const list = this.lists.find((l) => l.sid === listPath[1] && l.account_sid === accountSid)
      if (list === undefined) return this.#notFound(`/${accountSid}${path}`)
      if (listPath[2] === undefined && method === 'DELETE') {
        this.lists.splice(this.lists.indexOf(list), 1)
        for (const d of this.domains) d.credentialLists = d.credentialLists.filter((l) => l !== list.sid)
        return { status: 204, body: undefined }
      }
      if (listPath[2] !== undefined && method === 'POST') {
        const username = form.get('Username') ?? ''
        const password = form.get('Password') ?? ''
        if (username === '' || username.length > 32) return this.#fail(400, 21100, 'Username is required and must be at most 32 characters')
        if (!PASSWORD_RULE(password)) return this.#fail(400, 21100, 'Password must be a minimum of 12 characters, contain at least 1 digit, and have mixed case')
        if (list.credentials.some((c) => c.username === username)) return this.#fail(400, 21100, `Username ${username} is already in this list`)
        const credential = { sid: sid('CR'), username, password }
        list.credentials.push(credential)
        return { status: 201, body: { sid: credential.sid, account_sid: accountSid, credential_list_sid: list.sid, username } }
      }
    }
    return undefined
  }

  /**
   * A PBX sends an INVITE for `to` (a SIP URI whose host is the domain) from `from`, answering Twilio's challenge with
   * `credentials`: refused unless they are in a list mapped to the domain; else the domain's voice URL is posted.
   */
  async invite (to: string, from: string, credentials: SipCredentials | undefined, sourceIp = '127.0.0.1'): Promise<SipInvite> {
    const host = /^sips?:[^@]+@([^;:?]+)/i.exec(to)?.[1]
    const domain = this.domains.find((d) => d.domain_name === host)
    if (domain?.voice_url == null) return { refused: 404 }
    if (domain.credentialLists.length === 0) return { refused: 403 }
    const mapped = this.lists.filter((l) => domain.credentialLists.includes(l.sid))
    const known = mapped.some((l) => l.credentials.some((c) => c.username === credentials?.username && c.password === credentials.password))
    if (!known) return { refused: 401 }
    const params: Array<[string, string]> = [['SipDomain', domain.domain_name], ['SipDomainSid', domain.sid], ['SipUsername', credentials!.username],
      ['SipCallId', `${randomUUID()}@${sourceIp}`], ['SipSourceIp', sourceIp]]
    const hook = { url: domain.voice_url, method: domain.voice_method, statusCallback: domain.voice_status_callback_url }
    return await this.#voice.inbound(domain.account_sid, from, to, hook, params)
  }
}
