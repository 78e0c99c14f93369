import dns from 'node:dns'
import { readFileSync } from 'node:fs'
import net from 'node:net'
import { rootCertificates } from 'node:tls'
import { Agent, buildConnector } from 'undici'
import type { DeliveryConfig } from '../config.ts'
import { isPrivateAddress } from '../http/addresses.ts'

// Receivers must be on the public internet: a URL chosen by an API user (a delivery, an action, an MCP server)
// must not reach the server's own network (SSRF). Every address is checked BEFORE a connection is opened: a host name
// through the connector's DNS lookup (all of its addresses, and the socket connects only to those), an IP
// address in the URL before the connector is called. So not even a TCP handshake (or a TLS ClientHello)
// reaches a private address, and a refused, filtered or TLS-speaking internal port all look the same.

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
export function guardedAgent (config: DeliveryConfig): Agent {
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
