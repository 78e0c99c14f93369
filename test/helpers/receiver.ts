import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import https from 'node:https'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import type { Test } from 'tap'
import { poll } from './poll.ts'

export interface Received { method: string, url: string, headers: http.IncomingHttpHeaders, body: string, json: any }

/** What the receiver answers to one request; `hang` never answers. */
export interface Answer { status?: number, body?: string, headers?: Record<string, string>, hang?: boolean }

export interface Receiver {
  url: string
  received: Received[]
  /** Answers in turn; once used up, every request gets 200. */
  answers: Array<Answer | ((request: Received) => Answer)>
  /** Resolves once `count` requests have arrived (polls; fails after 20 s). */
  waitFor: (count: number) => Promise<Received[]>
}

function handler (receiver: Receiver) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    let raw = ''
    req.on('data', (chunk) => { raw += chunk })
    req.on('end', () => {
      let json: unknown
      try { json = raw === '' ? undefined : JSON.parse(raw) } catch { json = undefined }
      const request = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: raw, json }
      receiver.received.push(request)
      const next = receiver.answers.shift()
      const answer = typeof next === 'function' ? next(request) : next ?? {}
      if (answer.hang === true) return
      res.writeHead(answer.status ?? 200, answer.headers).end(answer.body ?? '{"ok":true}')
    })
  }
}

async function listen (t: Test, server: http.Server | https.Server, scheme: string, host: string): Promise<Receiver> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  const receiver: Receiver = {
    url: `${scheme}://${host}:${(server.address() as AddressInfo).port}`,
    received: [],
    answers: [],
    waitFor: async (count) => await poll(() => receiver.received, (all) => all.length >= count,
      { message: (all) => `the receiver got ${all.length} of ${count} requests` })
  }
  server.on('request', handler(receiver))
  return receiver
}

/** A real HTTP receiver on a free local port. */
export async function startReceiver (t: Test): Promise<Receiver> {
  return await listen(t, http.createServer(), 'http', '127.0.0.1')
}

export interface Certificates { dir: string, caFile: string }

/**
 * A certificate authority and, signed by it, a certificate for `localhost`, made with openssl; and a
 * self-signed certificate that no authority vouches for.
 */
export function makeCertificates (): Certificates & { signed: { key: string, cert: string }, selfSigned: { key: string, cert: string } } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'switchboard-tls-'))
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' })
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=Test CA', '-keyout', 'ca.key', '-out', 'ca.pem')
  run('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'server.key', '-out', 'server.csr')
  writeFileSync(path.join(dir, 'ext.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n')
  run('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'ext.cnf', '-out', 'server.pem')
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', 'self.key', '-out', 'self.pem')
  const read = (name: string) => readFileSync(path.join(dir, name), 'utf8')
  return {
    dir,
    caFile: path.join(dir, 'ca.pem'),
    signed: { key: read('server.key'), cert: read('server.pem') },
    selfSigned: { key: read('self.key'), cert: read('self.pem') }
  }
}

/** A real HTTPS receiver with the given certificate, at https://localhost:<port>. */
export async function startHttpsReceiver (t: Test, tls: { key: string, cert: string }): Promise<Receiver> {
  return await listen(t, https.createServer(tls), 'https', 'localhost')
}
