import dns from 'node:dns'
import { readFileSync } from 'node:fs'
import net from 'node:net'
import { rootCertificates } from 'node:tls'
import { Agent, buildConnector } from 'undici'
import type { DeliveryConfig } from '../../config.ts'

// Receivers must be on the public internet: a delivery URL is chosen by an API user and must not reach
// the server's own network (SSRF). Every address is checked BEFORE a connection is opened: a host name
// through the connector's DNS lookup (all of its addresses, and the socket connects only to those), an IP
// address in the URL before the connector is called. So not even a TCP handshake (or a TLS ClientHello)
// reaches a private address, and a refused, filtered or TLS-speaking internal port all look the same.

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

const BLOCKED_ADDRESS = 'SB_BLOCKED_ADDRESS'

/** A receiver refused by the address check; its message names the address, for the server log only. */
export class BlockedAddressError extends Error {
  code = BLOCKED_ADDRESS
}

/** Whether an error of a request is the address check's refusal. */
export const isBlockedAddress = (err: unknown): boolean =>
  (err as { code?: string } | undefined)?.code === BLOCKED_ADDRESS || (err as { cause?: { code?: string } } | undefined)?.cause?.code === BLOCKED_ADDRESS

/**
 * What an action's Test says when the host of the URL the user typed is not public (an IP literal, or a name that
 * resolves to such an address). That host is the user's own input, so saying so tells them nothing about the
 * server's network; no port, connection or reachability detail is added, so that it answers no other question.
 */
export const PRIVATE_ADDRESS_REFUSED = 'private addresses are refused: the URL\'s host is a loopback, private, link-local or other non-public address; ' +
  'DELIVERY_ALLOW_PRIVATE_NETWORKS=true on the server allows them (development only)'

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void

/**
 * A `lookup` for net/tls.connect that resolves every address of the host and refuses the host when any of
 * them is not public (a name that resolves to one public and one private address is refused, whichever
 * the socket would try first). The socket then connects only to the addresses checked here.
 */
export function publicLookup (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err !== null) return callback(err, [])
    const refused = addresses.find((entry) => isPrivateAddress(entry.address))
    if (refused !== undefined) return callback(new BlockedAddressError(`${hostname} resolves to ${refused.address}, which is not public`), [])
    if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), [])
    if (options.all === true) return callback(null, addresses)
    callback(null, addresses[0].address, addresses[0].family)
  })
}

/** An undici agent that connects only to public addresses (unless allowed) and always verifies certificates. */
export function deliveryAgent (config: DeliveryConfig): Agent {
  const ca = config.caFile === undefined ? undefined : [...rootCertificates, readFileSync(config.caFile, 'utf8')]
  const connect = buildConnector({
    ca,
    rejectUnauthorized: true,
    timeout: config.timeoutMs,
    ...(config.allowPrivateNetworks ? {} : { lookup: publicLookup })
  })
  return new Agent({
    connections: 64,
    connect: (options, callback) => {
      // An IP address in the URL is never looked up, so it is judged here, before anything is connected.
      if (!config.allowPrivateNetworks && net.isIP(options.hostname) !== 0 && isPrivateAddress(options.hostname)) {
        return callback(new BlockedAddressError(`${options.hostname} is not public`), null)
      }
      connect(options, callback)
    }
  })
}
