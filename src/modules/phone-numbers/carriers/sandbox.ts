import type { DB } from '../../../db/database.ts'
import { type AvailableNumber, type Carrier, CarrierError, type NumberSearch } from './carrier.ts'

interface Block {
  /** What `area_code` matches. */
  areaCode: string
  /** E.164 digits before the line part. */
  prefix: string
  /** Line numbers of the block, as written after the prefix. */
  first: number
  count: number
  width: number
  locality: string
  region: string
}

// Numbers set aside for fiction, so that no real subscriber is ever called from the sandbox:
// NANP 555-0100 to 555-0199 in every area code, Ofcom's drama ranges in the United Kingdom.
const NANP_LINES = { first: 100, count: 100, width: 4 }
const NANP_AREAS: Record<'US' | 'CA', Array<[string, string, string]>> = {
  US: [['212', 'New York', 'NY'], ['312', 'Chicago', 'IL'], ['415', 'San Francisco', 'CA'], ['512', 'Austin', 'TX'], ['617', 'Boston', 'MA'], ['206', 'Seattle', 'WA']],
  CA: [['416', 'Toronto', 'ON'], ['514', 'Montreal', 'QC'], ['604', 'Vancouver', 'BC']]
}
const GB_BLOCKS: Block[] = [
  { areaCode: '20', prefix: '44207946', first: 0, count: 1000, width: 4, locality: 'London', region: 'ENG' },
  { areaCode: '161', prefix: '44161496', first: 0, count: 1000, width: 4, locality: 'Manchester', region: 'ENG' },
  { areaCode: '7700', prefix: '447700900', first: 0, count: 1000, width: 3, locality: 'Mobile', region: 'GB' }
]
export const SANDBOX_COUNTRIES = ['US', 'CA', 'GB'] as const

const NANP_AREA_CODE = /^[2-9][0-9]{2}$/

function nanpBlock (areaCode: string, locality = '', region = ''): Block {
  return { areaCode, prefix: `1${areaCode}555`, ...NANP_LINES, locality, region }
}

/** The blocks a search looks in: any NANP area code can be asked for; otherwise the country's well-known ones. */
function blocksFor (country: string, areaCode: string | undefined): Block[] {
  if (country === 'US' || country === 'CA') {
    const known = NANP_AREAS[country].map(([code, locality, region]) => nanpBlock(code, locality, region))
    if (areaCode === undefined) return known
    if (!NANP_AREA_CODE.test(areaCode)) return []
    return known.filter((b) => b.areaCode === areaCode).concat(known.some((b) => b.areaCode === areaCode) ? [] : [nanpBlock(areaCode)])
  }
  if (country === 'GB') return GB_BLOCKS.filter((b) => areaCode === undefined || b.areaCode === areaCode)
  return []
}

function * numbersOf (block: Block): Generator<string> {
  for (let i = 0; i < block.count; i++) yield `+${block.prefix}${String(block.first + i).padStart(block.width, '0')}`
}

function friendly (phoneNumber: string, block: Block): string {
  if (phoneNumber.startsWith('+1')) return `(${phoneNumber.slice(2, 5)}) ${phoneNumber.slice(5, 8)}-${phoneNumber.slice(8)}`
  const local = phoneNumber.slice(3 + block.areaCode.length)
  return local.length > 6 ? `+44 ${block.areaCode} ${local.slice(0, -4)} ${local.slice(-4)}` : `+44 ${block.areaCode} ${local}`
}

/** The sandbox's block holding the number, if it is one of its fictional numbers. */
function blockOf (phoneNumber: string): Block | undefined {
  const nanp = /^\+1([2-9][0-9]{2})55501[0-9]{2}$/.exec(phoneNumber)
  if (nanp !== null) return nanpBlock(nanp[1])
  return GB_BLOCKS.find((b) => {
    const line = phoneNumber.slice(b.prefix.length + 1)
    return phoneNumber.startsWith(`+${b.prefix}`) && line.length === b.width && Number(line) >= b.first && Number(line) < b.first + b.count
  })
}

/**
 * A carrier without a network, for trying the platform: a fixed inventory of fictional numbers, the
 * same on every installation, from which the numbers already on this installation are left out.
 * Every sandbox number counts as held by the caller's sandbox account, so any of them can be imported.
 */
export function createSandboxCarrier (db: DB): Carrier {
  return {
    name: 'sandbox',
    accountId: null,
    async search (query: NumberSearch): Promise<AvailableNumber[]> {
      const found: AvailableNumber[] = []
      for (const block of blocksFor(query.country, query.areaCode)) {
        const candidates = [...numbersOf(block)].filter((n) => query.contains === undefined || n.includes(query.contains))
        if (candidates.length === 0) continue
        const taken = new Set((await db.selectFrom('phone_numbers').select('phone_number').where('phone_number', 'in', candidates).execute()).map((r) => r.phone_number))
        for (const phoneNumber of candidates) {
          if (taken.has(phoneNumber)) continue
          found.push({ phoneNumber, friendlyName: friendly(phoneNumber, block), country: query.country, locality: block.locality || null, region: block.region || null })
          if (found.length >= query.limit) return found
        }
      }
      return found
    },
    async buy (phoneNumber: string) {
      if (blockOf(phoneNumber) === undefined) {
        throw new CarrierError('unavailable', `${phoneNumber} is not in the sandbox inventory; search it with GET /v1/phone-number/available`)
      }
      return { carrierNumberId: `SB${phoneNumber.slice(1)}`, phoneNumber }
    },
    // The sandbox places no calls: its numbers' calls are simulated.
    async connect () {},
    async release () {},
    async findOwned (phoneNumber: string) {
      return blockOf(phoneNumber) === undefined ? undefined : { carrierNumberId: `SB${phoneNumber.slice(1)}`, phoneNumber }
    }
  }
}
