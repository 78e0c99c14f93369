import { Type } from 'typebox'

// The fields that the API's routes and the console's forms both check.

export const Nickname = Type.String({ maxLength: 100, description: 'a label for people' })
export const CarrierName = Type.Enum(['sandbox', 'twilio', 'telnyx'])
export const Country = Type.String({ pattern: '^[A-Za-z]{2}$', description: 'ISO 3166-1 alpha-2 country code', examples: ['US'] })
export const AreaCode = Type.String({ pattern: '^[0-9]{2,4}$', description: 'area code (NPA in the US and Canada)', examples: ['415'] })
export const Contains = Type.String({ pattern: '^[0-9]{1,10}$', description: 'digits the number must contain' })
export const AccountSid = Type.String({ pattern: '^AC[0-9a-fA-F]{32}$', description: 'Twilio account SID' })
export const AuthToken = Type.String({ minLength: 1, maxLength: 200, description: 'Twilio auth token' })
/** A tenant's own Telnyx account: its API key (v2, Bearer) and the Ed25519 public key its webhooks are signed with. */
export const TelnyxApiKey = Type.String({ minLength: 1, maxLength: 200, pattern: '^[\\x21-\\x7e]+$', description: 'the API key (v2) of your Telnyx account (Mission Control: API Keys); kept for later requests, never returned' })
export const TelnyxPublicKey = Type.String({ pattern: '^[A-Za-z0-9+/]{43}=$', description: 'your Telnyx account\'s webhook signing public key, base64 of 32 bytes (Mission Control: Keys & Credentials, Public Key); Telnyx\'s API does not give it' })
