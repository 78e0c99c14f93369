import net from 'node:net'

// Which addresses and names are on the public internet: deliveries refuse the others (SSRF), and a carrier
// on the internet cannot reach a server whose PUBLIC_BASE_URL names one.

const blocked4 = new net.BlockList()
for (const [network, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24],
  ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4]
] as const) blocked4.addSubnet(network, prefix, 'ipv4')

const blocked6 = new net.BlockList()
for (const [network, prefix] of [
  // IPv4-compatible (deprecated; also holds :: and ::1), discard-only, documentation, unique-local,
  // site-local (deprecated), link-local and multicast.
  ['::', 96], ['100::', 64], ['2001:db8::', 32], ['fc00::', 7], ['fec0::', 10], ['fe80::', 10], ['ff00::', 8],
  // Tunnels and translators whose far end is an IPv4 address chosen by whoever publishes the address:
  // local-use NAT64, 6to4 and Teredo. No receiver needs them, and each can lead into a private network.
  ['64:ff9b:1::', 48], ['2002::', 16], ['2001::', 32]
] as const) blocked6.addSubnet(network, prefix, 'ipv6')

/** The eight 16-bit words of a valid IPv6 address (a trailing dotted IPv4 part included). */
function ipv6Words (address: string): number[] {
  let text = address
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (dotted !== null) {
    const [a, b, c, d] = dotted.slice(1).map(Number)
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head, tail] = text.split('::')
  const parse = (part: string | undefined) => (part === undefined || part === '' ? [] : part.split(':').map((word) => parseInt(word, 16)))
  const first = parse(head)
  const last = parse(tail)
  return [...first, ...new Array<number>(8 - first.length - last.length).fill(0), ...last]
}

/** Prefixes (first six words) whose last 32 bits are an IPv4 address that the connection really reaches. */
const EMBEDDING = [
  [0, 0, 0, 0, 0, 0xffff], // IPv4-mapped, ::ffff:0:0/96
  [0x64, 0xff9b, 0, 0, 0, 0] // NAT64 well-known prefix, 64:ff9b::/96
]

/**
 * Whether an address is not a public receiver: private, loopback, link-local, CGNAT, unique-local,
 * metadata, documentation, multicast, a tunnel or translator prefix, or not an IP address at all. A pure
 * function: nothing is looked up or connected.
 */
export function isPrivateAddress (address: string): boolean {
  const plain = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '')
  const family = net.isIP(plain)
  if (family === 4) return blocked4.check(plain, 'ipv4')
  if (family !== 6) return true
  const words = ipv6Words(plain)
  if (EMBEDDING.some((prefix) => prefix.every((word, i) => words[i] === word))) {
    return blocked4.check([words[6] >> 8, words[6] & 255, words[7] >> 8, words[7] & 255].join('.'), 'ipv4')
  }
  return blocked6.check(plain, 'ipv6')
}

// Names that resolve nowhere on the public internet: special-use (RFC 6761, RFC 8375), ICANN's private-use
// `internal`, mDNS's `local`, and suffixes that home and company networks commonly use.
const PRIVATE_SUFFIXES = ['localhost', 'local', 'internal', 'test', 'example', 'invalid', 'home.arpa', 'lan', 'home', 'corp', 'intranet', 'private', 'localdomain']

/**
 * Why an outside service (Twilio) could not call back `baseUrl`, or undefined when it can: an `https://` URL on a
 * public name or address. A pure function: nothing is looked up.
 */
export function unreachableFromInternet (baseUrl: string): string | undefined {
  let url: URL
  try {
    url = new URL(baseUrl)
  } catch {
    return 'it is not a URL'
  }
  if (url.protocol !== 'https:') return 'it is not https://'
  const host = url.hostname.replace(/\.$/, '').toLowerCase()
  if (net.isIP(host.replace(/^\[|\]$/g, '')) !== 0) return isPrivateAddress(host) ? `${host} is a private, loopback or reserved address` : undefined
  if (!host.includes('.')) return `${host} is not a public name`
  const suffix = PRIVATE_SUFFIXES.find((s) => host === s || host.endsWith(`.${s}`))
  return suffix === undefined ? undefined : `${host} is not a public name (.${suffix})`
}
