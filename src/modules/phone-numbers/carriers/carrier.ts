import type { CarrierName } from '../../../db/schema.ts'

export interface NumberSearch {
  /** ISO 3166-1 alpha-2, upper case. */
  country: string
  areaCode?: string
  /** Digits the number must contain. */
  contains?: string
  limit: number
}

export interface AvailableNumber {
  phoneNumber: string
  friendlyName: string
  country: string
  locality: string | null
  region: string | null
}

/** A number held at a carrier: the carrier's own id for it, used to release or configure it. */
export interface CarrierNumber {
  carrierNumberId: string
  phoneNumber: string
}

/** Where the carrier sends a number's calls: this server's voice webhook and status callback. */
export interface NumberWebhooks { voiceUrl: string, statusCallback: string }

/** What every carrier adapter does. Adapters answer facts or throw CarrierError; they never touch the database's records. */
export interface Carrier {
  readonly name: CarrierName
  /** The account the adapter acts for (a Twilio account SID), stored with imported and bought numbers. */
  readonly accountId: string | null
  search: (query: NumberSearch) => Promise<AvailableNumber[]>
  /** Buys the number with its calls sent to `hooks`. */
  buy: (phoneNumber: string, hooks: NumberWebhooks) => Promise<CarrierNumber>
  /** Sends the calls of a number the account holds to `hooks` (an import). */
  connect: (number: CarrierNumber, hooks: NumberWebhooks) => Promise<void>
  /** Gives a bought number back. A number the carrier no longer knows counts as released. */
  release: (number: CarrierNumber) => Promise<void>
  /** The number in the carrier account, for an import; undefined when the account does not hold it. */
  findOwned: (phoneNumber: string) => Promise<CarrierNumber | undefined>
}

/**
 * `unavailable`: the number cannot be had (taken, not offered). `credentials`: the carrier refused the
 * account's credentials. `rejected`: the carrier refused the request itself. `failed`: the carrier
 * could not be reached or failed on its side.
 */
export type CarrierErrorKind = 'unavailable' | 'credentials' | 'rejected' | 'failed'

export class CarrierError extends Error {
  readonly kind: CarrierErrorKind
  /** The carrier's own error code, where it gave one. */
  readonly carrierCode: number | undefined
  /** The HTTP status the carrier answered, where it answered (429 tells a refusal to try later from a final one). */
  readonly status: number | undefined

  constructor (kind: CarrierErrorKind, message: string, carrierCode?: number, status?: number) {
    super(message)
    this.kind = kind
    this.carrierCode = carrierCode
    this.status = status
  }
}
