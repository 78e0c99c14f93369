import { readFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { loadConfig } from '../src/config.ts'

const ROOT = path.resolve(import.meta.dirname, '..')

t.test('docker compose holds calls with the voice engine, so the README walkthrough works there too', async (t) => {
  const compose = await readFile(path.join(ROOT, 'compose.yaml'), 'utf8')
  const service = compose.slice(compose.indexOf('  switchboard:'), compose.indexOf('  postgres:'))
  // `NAME: value` lines of its environment, `${NAME:-default}` taken as the default; `${NAME:?…}` must be set
  // by the person who runs it (SECRETS_KEY, from .env): a key of the right form stands in for theirs.
  const env = Object.fromEntries([...service.matchAll(/^ {6}([A-Z_]+): (.*)$/gm)]
    .map(([, name, value]) => [name, value.replace(/^\$\{[A-Z_]+:-(.*)\}$/, '$1').replace(/^\$\{[A-Z_]+:\?.*\}$/, Buffer.alloc(32, 7).toString('base64'))]))
  t.ok(env.DATABASE_URL, 'beside its own PostgreSQL')
  t.match(service, /SECRETS_KEY: \$\{SECRETS_KEY:\?/, 'the stored credentials\' key is the operator\'s, required')
  const config = loadConfig(env)
  t.equal(config.callRuntime, 'voice')
  t.equal(config.publicBaseUrl, 'http://localhost:3000', 'links point at the published port')
})

t.test('npm start and the image run the entry that checks the Node.js version, with the memory flag', async (t) => {
  const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }
  t.equal(pkg.scripts.start, 'node --max-semi-space-size=16 src/start.js')
  t.match(await readFile(path.join(ROOT, 'Dockerfile'), 'utf8'), /^CMD \["node", "--max-semi-space-size=16", "src\/start.js"\]$/m)
})
