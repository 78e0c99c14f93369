import type { FastifyInstance } from 'fastify'

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

export function escapeHtml (text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c])
}

interface Link { href: string, label: string, note: string }

// What someone who opens the server in a browser can go to. The console adds its entry here once it exists.
const LINKS: Link[] = [
  { href: '/docs', label: 'API reference', note: 'every /v1 route, tried out with your x-api-key' },
  { href: '/openapi.json', label: 'OpenAPI document', note: 'for client generators' },
  { href: '/health', label: 'Health', note: 'whether the server and its database are up' }
]

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Switchboard</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem}li{margin:.5rem 0}</style>
</head>
<body>
<h1>Switchboard</h1>
<p>This server answers the voice agent API under <code>/v1</code>; each request carries an <code>x-api-key</code> header.</p>
<ul>
${LINKS.map((link) => `<li><a href="${escapeHtml(link.href)}">${escapeHtml(link.label)}</a>: ${escapeHtml(link.note)}</li>`).join('\n')}
</ul>
</body>
</html>
`

/** `GET /`: a small page of links instead of a 404 for whoever opens the address in a browser. */
export async function homeRoutes (app: FastifyInstance): Promise<void> {
  app.get('/', { schema: { hide: true } }, async (_request, reply) => {
    return reply
      .type('text/html; charset=utf-8')
      // No script at all; the one inline style is the page's whole design.
      .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'")
      .send(PAGE)
  })
}
