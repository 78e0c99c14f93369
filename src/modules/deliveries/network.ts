import { readFileSync } from 'node:fs'
import net from 'node:net'
import { rootCertificates } from 'node:tls'
import { Agent, buildConnector } from 'undici'
import type { DeliveryConfig } from '../../config.ts'

// Receivers must be on the public internet: a delivery URL is chosen by an API user and must not reach
// the server's own network (SSRF). The check runs on the address actually connected to, after DNS and for
// every redirect, so neither a hostname resolving to 10.0.0.1 nor a raw IP address slips through.

const blocked = new net.BlockList()
for (const [network, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24],
  ['224.0.0.0', 4], ['240.0.0.0', 4]
] as const) blocked.addSubnet(network, prefix, 'ipv4')
for (const [network, prefix] of [
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['2001:db8::', 32], ['100::', 64]
] as const) blocked.addSubnet(network, prefix, 'ipv6')

/** Whether an address is private, loopback, link-local, CGNAT, unique-local, metadata or otherwise not public. */
export function isPrivateAddress (address: string): boolean {
  const plain = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '')
  // IPv4-mapped (::ffff:10.0.0.1) and NAT64 (64:ff9b::a00:1) forms carry an IPv4 address: judge that one.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(plain)?.[1] ?? embeddedIpv4(plain)
  if (mapped !== undefined) return blocked.check(mapped, 'ipv4')
  const family = net.isIP(plain)
  if (family === 0) return true
  return blocked.check(plain, family === 4 ? 'ipv4' : 'ipv6')
}

/** The IPv4 address inside ::ffff:a00:1 (hex mapped form) or 64:ff9b::/96 (NAT64), if any. */
function embeddedIpv4 (address: string): string | undefined {
  if (net.isIPv6(address) === false) return undefined
  const match = /^(?:::ffff|64:ff9b:):([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address)
  if (match === null) return undefined
  const high = parseInt(match[1], 16)
  const low = parseInt(match[2], 16)
  return [high >> 8, high & 255, low >> 8, low & 255].join('.')
}

export class BlockedAddressError extends Error {}

/** An undici agent whose every connection is checked; certificates are always verified. */
export function deliveryAgent (config: DeliveryConfig): Agent {
  const ca = config.caFile === undefined ? undefined : [...rootCertificates, readFileSync(config.caFile, 'utf8')]
  const connect = buildConnector({ ca, rejectUnauthorized: true, timeout: config.timeoutMs })
  return new Agent({
    connections: 64,
    connect: (options, callback) => {
      connect(options, (err, socket) => {
        if (err !== null) return callback(err, null)
        const address = socket.remoteAddress ?? ''
        if (!config.allowPrivateNetworks && isPrivateAddress(address)) {
          socket.destroy()
          return callback(new BlockedAddressError(`the receiver's address ${address} is not public`), null)
        }
        callback(null, socket)
      })
    }
  })
}
