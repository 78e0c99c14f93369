import type { FastifyInstance, FastifyReply } from 'fastify'
import type { DB } from '../../db/database.ts'
import { previousSecretExpiry } from '../deliveries/queries.ts'
import { currentSecret, ROTATION_OVERLAP_HOURS, rotateSecret, testSecret } from '../deliveries/signing.ts'
import { html } from './html.ts'
import { csrfField, layout, when, viewerOf } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { sessionOf } from './security.ts'
import { HIDDEN, sendPage } from './reply.ts'

// The console's settings (docs/console.md): the webhook signing secret, revealed or rotated by a POST whose
// answer is the only page that shows it (never a GET page, never a URL), and the way to the password page.

interface Shown { secret: string, testSecret: string, rotated: boolean }

export async function consoleSettingsRoutes (app: FastifyInstance, { db }: { db: DB }): Promise<void> {
  async function page (reply: FastifyReply, session: ConsoleSession, shown?: Shown) {
    const viewer = viewerOf(session)
    // The secret is read for its date only: this page prints the secret only in `shown`.
    const { created_at: createdAt } = await currentSecret(db, session.userId)
    const previousUntil = await previousSecretExpiry(db, session.userId)
    return sendPage(reply, 200, layout({
      title: 'Settings',
      viewer,
      current: '/settings',
      body: html`
<section aria-labelledby="secret-title">
<h2 id="secret-title">Webhook signing secret</h2>
<p>Every request Switchboard sends to your webhooks and API-call actions carries the Standard Webhooks headers
(<code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>), signed with this secret.
Your receiver checks them with it. The Test button of an API call action signs with a separate test secret (shown
beside it), since a workspace admin may write what a test sends.</p>
${shown !== undefined && html`<section class="notice success created" aria-labelledby="shown-title">
  <h3 id="shown-title">${shown.rotated ? 'Your new signing secret' : 'Your signing secret'}</h3>
  <p>Copy it into your receiver's configuration. It is shown on this page only; reveal it again when you need it.</p>
  <p><code id="signing-secret" class="secret">${shown.secret}</code></p>
  ${shown.rotated && html`<p>The previous secret keeps signing for ${ROTATION_OVERLAP_HOURS} hours.</p>`}
  <h3>Test signing secret</h3>
  <p>Signs only the requests of an API call action's <strong>Test</strong> button, never a delivery. A receiver that should
  accept test requests checks them with this one; one that acts only on deliveries leaves it out.</p>
  <p><code id="test-signing-secret" class="secret">${shown.testSecret}</code></p>
</section>`}
<dl class="facts">
  <dt>Current secret since</dt><dd>${when(createdAt)}</dd>
  ${previousUntil !== undefined && html`<dt>Previous secret signs until</dt><dd>${when(previousUntil)}</dd>`}
</dl>
<form method="post" action="/settings/signing-secret/reveal">${csrfField(viewer.csrfToken)}<button type="submit">Reveal the secret</button></form>
<h3>Rotate</h3>
<p>Makes a new secret. For ${ROTATION_OVERLAP_HOURS} hours every request carries a signature with the new secret and one
with the previous, so that your receiver can switch without losing a request; then only the new one signs.</p>
<form method="post" action="/settings/signing-secret/rotate">${csrfField(viewer.csrfToken)}<button type="submit" class="danger">Rotate the secret</button></form>
</section>
<section aria-labelledby="password-title">
<h2 id="password-title">Password</h2>
<p><a href="/account/password">Change your password</a>. Other browsers signed in as you are signed out when you do.</p>
</section>`
    }))
  }

  app.get('/settings', HIDDEN, async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    return await page(reply, session)
  })

  app.post('/settings/signing-secret/reveal', HIDDEN, async (request, reply) => {
    const session = request.consoleSession!
    return await page(reply, session, { secret: (await currentSecret(db, session.userId)).secret, testSecret: await testSecret(db, session.userId), rotated: false })
  })

  app.post('/settings/signing-secret/rotate', HIDDEN, async (request, reply) => {
    const session = request.consoleSession!
    return await page(reply, session, { secret: (await rotateSecret(db, session.userId)).secret, testSecret: await testSecret(db, session.userId), rotated: true })
  })
}
