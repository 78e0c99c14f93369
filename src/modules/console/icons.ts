import { readFileSync } from 'node:fs'
import type { FastifyInstance } from 'fastify'
import { HIDDEN } from './reply.ts'

// The site's icon: the console's layout links the SVG; browsers ask every other page's icon (the web-call page,
// /docs, a JSON answer) at /favicon.ico, which is the same drawing at 32×32 (a PNG inside an ICO).
const ICONS = [
  { path: '/favicon.svg', type: 'image/svg+xml', body: readFileSync(new URL('./static/favicon.svg', import.meta.url)) },
  { path: '/favicon.ico', type: 'image/x-icon', body: readFileSync(new URL('./static/favicon.ico', import.meta.url)) }
]

/** Served by every process that answers HTTP, whatever its ROLE: the web-call page has no console around it. */
export async function iconRoutes (app: FastifyInstance): Promise<void> {
  for (const icon of ICONS) {
    app.get(icon.path, HIDDEN, async (_request, reply) => reply.type(icon.type)
      // An SVG is a document: this one may run nothing and load nothing, even opened on its own.
      .headers({ 'cache-control': 'public, max-age=86400', 'x-content-type-options': 'nosniff', 'content-security-policy': "default-src 'none'" })
      .send(icon.body))
  }
}
