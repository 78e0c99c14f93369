import { createInflateRaw } from 'node:zlib'

/** What a ZIP archive (a DOCX) may unpack to before anything reads it. */
export interface ZipLimits {
  maxEntries: number
  maxUncompressedBytes: number
  /** Declared unpacked bytes per byte of archive; checked once the contents pass RATIO_FLOOR. */
  maxRatio: number
}

// Small packages compress well without being bombs (a short DOCX unpacks to ~30 KB from ~10 KB).
const RATIO_FLOOR = 1024 * 1024

const END_OF_DIRECTORY = 0x06054b50
const ZIP64_LOCATOR = 0x07064b50
const ZIP64_END_OF_DIRECTORY = 0x06064b50
const DIRECTORY_ENTRY = 0x02014b50
const LOCAL_HEADER = 0x04034b50
const ZIP64_EXTRA = 0x0001
const MAX_32 = 0xffffffff
const STORED = 0
const DEFLATED = 8

interface Entry { name: string, method: number, compressedSize: number, uncompressedSize: number, localOffset: number }

class Damaged extends Error {}

const mb = (bytes: number) => `${Math.ceil(bytes / 1024 / 1024)} MB`

/**
 * Why the archive must not be unpacked (`what` names it in the message: "the DOCX"), or undefined. Reads the
 * central directory (sizes as declared: entries, total, ratio), then inflates each entry, counting and discarding
 * its bytes, to prove no entry unpacks to more than it declares; the library that reads the archive next
 * trusts those declared sizes only after this.
 */
export async function zipProblem (zip: Buffer, limits: ZipLimits, what: string): Promise<string | undefined> {
  try {
    const directory = findDirectory(zip)
    if (directory.count > limits.maxEntries) return `${what} holds ${directory.count} files, more than the ${limits.maxEntries} allowed`
    const entries = readDirectory(zip, directory)
    const total = entries.reduce((sum, e) => sum + e.uncompressedSize, 0)
    if (total > limits.maxUncompressedBytes) return `${what} unpacks to ${mb(total)}, more than the ${mb(limits.maxUncompressedBytes)} allowed`
    if (total > RATIO_FLOOR && total / zip.length > limits.maxRatio) {
      return `${what} unpacks to ${Math.round(total / zip.length)} times its size, more than the ${limits.maxRatio} times allowed (a decompression bomb)`
    }
    for (const entry of entries) {
      if (await unpackedSize(zip, entry) > entry.uncompressedSize) return `${what} cannot be read: ${entry.name} unpacks to more than the ${entry.uncompressedSize} bytes it declares`
    }
    return undefined
  } catch (err) {
    if (err instanceof Damaged) return `${what} cannot be read: ${err.message}`
    throw err
  }
}

interface Directory { count: number, offset: number }

function findDirectory (zip: Buffer): Directory {
  // The end record is 22 bytes plus a comment of at most 65,535.
  for (let at = zip.length - 22; at >= Math.max(0, zip.length - 22 - 0xffff); at--) {
    if (zip.readUInt32LE(at) !== END_OF_DIRECTORY) continue
    const locator = at - 20
    if (locator >= 0 && zip.readUInt32LE(locator) === ZIP64_LOCATOR) {
      const end = safeNumber(zip.readBigUInt64LE(locator + 8))
      if (end + 56 > zip.length || zip.readUInt32LE(end) !== ZIP64_END_OF_DIRECTORY) throw new Damaged('its ZIP64 directory is missing')
      return { count: safeNumber(zip.readBigUInt64LE(end + 32)), offset: safeNumber(zip.readBigUInt64LE(end + 48)) }
    }
    return { count: zip.readUInt16LE(at + 10), offset: zip.readUInt32LE(at + 16) }
  }
  throw new Damaged('it is not a complete ZIP archive (no end of central directory)')
}

function safeNumber (value: bigint): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new Damaged('its directory holds impossible sizes')
  return Number(value)
}

function readDirectory (zip: Buffer, directory: Directory): Entry[] {
  const entries: Entry[] = []
  let at = directory.offset
  for (let i = 0; i < directory.count; i++) {
    if (at + 46 > zip.length || zip.readUInt32LE(at) !== DIRECTORY_ENTRY) throw new Damaged('its central directory is damaged')
    const nameLength = zip.readUInt16LE(at + 28)
    const extraLength = zip.readUInt16LE(at + 30)
    const commentLength = zip.readUInt16LE(at + 32)
    if (at + 46 + nameLength + extraLength > zip.length) throw new Damaged('its central directory is damaged')
    const entry: Entry = {
      name: zip.toString('utf8', at + 46, at + 46 + nameLength),
      method: zip.readUInt16LE(at + 10),
      compressedSize: zip.readUInt32LE(at + 20),
      uncompressedSize: zip.readUInt32LE(at + 24),
      localOffset: zip.readUInt32LE(at + 42)
    }
    zip64Sizes(zip.subarray(at + 46 + nameLength, at + 46 + nameLength + extraLength), entry)
    entries.push(entry)
    at += 46 + nameLength + extraLength + commentLength
  }
  return entries
}

/** Sizes too large for 32 bits are 0xffffffff in the entry and follow, in this order, in its ZIP64 extra field. */
function zip64Sizes (extra: Buffer, entry: Entry): void {
  const wide = (['uncompressedSize', 'compressedSize', 'localOffset'] as const).filter((field) => entry[field] === MAX_32)
  if (wide.length === 0) return
  for (let at = 0; at + 4 <= extra.length; at += 4 + extra.readUInt16LE(at + 2)) {
    if (extra.readUInt16LE(at) !== ZIP64_EXTRA) continue
    if (at + 4 + wide.length * 8 > extra.length) break
    wide.forEach((field, i) => { entry[field] = safeNumber(extra.readBigUInt64LE(at + 4 + i * 8)) })
    return
  }
  throw new Damaged(`${entry.name} has no ZIP64 sizes`)
}

/** Bytes the entry unpacks to, counted up to one past its declared size; whatever is past that is not read. */
async function unpackedSize (zip: Buffer, entry: Entry): Promise<number> {
  const local = entry.localOffset
  if (local + 30 > zip.length || zip.readUInt32LE(local) !== LOCAL_HEADER) throw new Damaged(`${entry.name} is missing`)
  const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28)
  const data = zip.subarray(start, start + entry.compressedSize)
  if (entry.method === STORED) return data.length
  // Other methods: the reader refuses them with its own message.
  if (entry.method !== DEFLATED) return 0
  const inflate = createInflateRaw()
  inflate.end(data)
  let size = 0
  try {
    for await (const chunk of inflate as AsyncIterable<Buffer>) {
      size += chunk.length
      if (size > entry.uncompressedSize) break
    }
  } catch {
    // Corrupt data: the reader reports it.
  }
  return size
}
