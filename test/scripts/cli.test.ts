import t from 'tap'
import { KEY_CACHE_MS } from '../../src/modules/users/auth.ts'
import { createAccount, setup } from '../helpers/app.ts'
import { poll } from '../helpers/poll.ts'
import { runScript } from '../helpers/scripts.ts'

const cli = async (url: string, ...args: string[]) => await runScript('cli.ts', url, ...args)

t.test('users and keys are managed from the command line', async (t) => {
  const { app, db, url } = await setup(t)

  const created = await cli(url, 'user', 'create', '--email', 'ada@example.com', '--name', 'Ada', '--language', 'de')
  t.equal(created.code, 0, created.stderr)
  t.match(created.stdout, /^created user [0-9a-f]{24} ada@example.com/)
  const user = await db.selectFrom('users').selectAll().where('email', '=', 'ada@example.com').executeTakeFirstOrThrow()
  t.match(user, { name: 'Ada', language: 'de' })

  const duplicate = await cli(url, 'user', 'create', '--email', 'ADA@example.com')
  t.equal(duplicate.code, 1)
  t.match(duplicate.stderr, /exists/)

  const key = await cli(url, 'key', 'create', '--user', 'ada@example.com', '--name', 'ci')
  t.equal(key.code, 0, key.stderr)
  const secret = key.stdout.split('\n')[0]
  t.match(secret, /^sk_[0-9A-Za-z]{40}$/)
  const headers = { 'x-api-key': secret }
  t.equal((await app.inject({ method: 'GET', url: '/v1/voice/list', headers })).statusCode, 200)

  t.equal((await cli(url, 'key', 'create', '--user', user.id)).code, 0, 'a user by id')
  t.equal((await cli(url, 'key', 'create', '--user', user.id)).code, 0)
  const fourth = await cli(url, 'key', 'create', '--user', user.id)
  t.equal(fourth.code, 1)
  t.match(fourth.stderr, /at most 3 active API keys/)

  const list = await cli(url, 'key', 'list', '--user', 'ada@example.com')
  t.equal(list.stdout.trim().split('\n').length, 3)
  t.match(list.stdout, new RegExp(`${secret.slice(0, 11)}…\\s+active`))
  t.notMatch(list.stdout, secret, 'the key itself is never shown again')

  // Revoked by the text key list printed for it, ellipsis included.
  const shown = list.stdout.split(/\s+/).find((word) => word.startsWith(secret.slice(0, 11)))!
  t.equal(shown, `${secret.slice(0, 11)}…`)
  const revoked = await cli(url, 'key', 'revoke', shown)
  t.equal(revoked.code, 0, revoked.stderr)
  // Another process revoked it: the server forgets its cached lookup within KEY_CACHE_MS.
  const status = await poll(async () => (await app.inject({ method: 'GET', url: '/v1/voice/list', headers })).statusCode,
    (status) => status === 403, { timeoutMs: KEY_CACHE_MS + 5000, intervalMs: 100 })
  t.equal(status, 403)
  t.match((await cli(url, 'key', 'list', '--user', user.id)).stdout, new RegExp(`${secret.slice(0, 11)}…\\s+revoked`))
  t.equal((await cli(url, 'key', 'revoke', secret.slice(0, 11))).code, 1, 'revoking twice finds no active key')
})

t.test('bad usage exits 2 with a message', async (t) => {
  const { db, url } = await setup(t)
  await createAccount(db)
  const none = await cli(url)
  t.equal(none.code, 2)
  t.match(none.stderr, /usage:/)
  const noEmail = await cli(url, 'user', 'create')
  t.equal(noEmail.code, 2)
  t.match(noEmail.stderr, /--email is required/)
  const badLanguage = await cli(url, 'user', 'create', '--email', 'x@example.com', '--language', 'Deutsch!')
  t.equal(badLanguage.code, 2)
  const unknownUser = await cli(url, 'key', 'list', '--user', 'nobody@example.com')
  t.equal(unknownUser.code, 2)
  t.match(unknownUser.stderr, /no user nobody@example.com/)
})
