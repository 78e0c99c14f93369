import type { FastifyInstance, FastifyReply } from 'fastify'
import { Type } from 'typebox'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import { previousSecretExpiry } from '../deliveries/queries.ts'
import { currentSecret, ROTATION_OVERLAP_HOURS, rotateSecret, testSecret } from '../deliveries/signing.ts'
import { changeMessagingSettings, messagingSettings, MessagingSettingsBody, type messagingSettingsView } from '../messaging/settings.ts'
import { errorSummary } from './components.ts'
import { DRAFT_QUERY, draftOf, formSaved, refuseForm } from './drafts.ts'
import { formOf } from './fields.ts'
import { fieldValues, objectFields, readFields, renderFields, type FormValues, type Problems } from './forms.ts'
import { html } from './html.ts'
import { csrfField, layout, notice, when, viewerOf, type Viewer } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { sessionOf } from './security.ts'
import { formBody, page, sendPage, text } from './reply.ts'

// The console's settings (docs/console.md): the webhook signing secret, revealed or rotated by a POST whose
// answer is the only page that shows it (never a GET page, never a URL), the senders of the agents' messages
// (the API's messaging settings), and the way to the password page.

interface Shown { secret: string, testSecret: string, rotated: boolean }

/** The messaging settings' form: the API's PATCH body, field by field. */
const MESSAGING_FIELDS = objectFields(MessagingSettingsBody, '', {
  labels: { whatsapp_sender: 'WhatsApp sender', email_from_name: 'E-mail sender name', email_reply_to: 'Replies go to' },
  hints: {
    whatsapp_sender: 'One of your Twilio numbers that Twilio has enabled for WhatsApp, such as +14155550100. WhatsApp actions send from it. Empty: none (WhatsApp messages fail).',
    email_from_name: 'The name your e-mails show; the address is this installation\'s own. Empty: the installation\'s name.',
    email_reply_to: 'Where replies to your agents\' e-mails go. Empty: to the installation\'s address.'
  }
})

const MESSAGING_FORM = formBody(Object.fromEntries(MESSAGING_FIELDS.map((field) => [field.name, text(field.label)])))

interface MessagingForm { values: FormValues, problems: Problems, saved?: boolean }

/** The settings page; `shown`: the secrets, on the answer of a reveal or a rotation only (never a GET). */
function settingsView (options: { viewer: Viewer, stored: ReturnType<typeof messagingSettingsView>, createdAt: Date, previousUntil: Date | undefined, shown?: Shown, form: MessagingForm }): string {
  const { viewer, stored, createdAt, previousUntil, shown, form } = options
  return layout({
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
<section aria-labelledby="messaging-title">
<h2 id="messaging-title">Messages</h2>
<p>Your agents' e-mails come from <code>${stored.email_from}</code>; SMS from your phone numbers; WhatsApp messages
from the sender below (docs/messaging.md).</p>
${form.saved === true && notice('success', 'Saved.')}
${errorSummary(form.problems)}
<form method="post" action="/settings/messaging" class="stack">${csrfField(viewer.csrfToken)}
${renderFields(MESSAGING_FIELDS, form.values, form.problems)}
<button type="submit">Save</button>
</form>
</section>
<section aria-labelledby="password-title">
<h2 id="password-title">Password</h2>
<p><a href="/account/password">Change your password</a>. Other browsers signed in as you are signed out when you do.</p>
</section>`
  })
}

export async function consoleSettingsRoutes (app: FastifyInstance, { db, config }: { db: DB, config: Config }): Promise<void> {
  async function showSettings (reply: FastifyReply, session: ConsoleSession, shown?: Shown, messaging?: MessagingForm) {
    const stored = await messagingSettings(db, config, session.userId)
    // The secret is read for its date only: the page prints the secret only in `shown`.
    const { created_at: createdAt } = await currentSecret(db, session.userId)
    const previousUntil = await previousSecretExpiry(db, session.userId)
    const form = messaging ?? { values: fieldValues(MESSAGING_FIELDS, stored), problems: {} }
    return sendPage(reply, 200, settingsView({ viewer: viewerOf(session), stored, createdAt, previousUntil, shown, form }))
  }

  app.get<{ Querystring: { saved?: string, draft?: string } }>('/settings', page({ querystring: Type.Object({ saved: text('The saved notice'), draft: DRAFT_QUERY }) }), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const draft = await draftOf(db, session, '/settings', request.query.draft)
    if (draft !== undefined) return await showSettings(reply, session, undefined, draft)
    if (request.query.saved !== 'messaging') return await showSettings(reply, session)
    const stored = await messagingSettings(db, config, session.userId)
    return await showSettings(reply, session, undefined, { values: fieldValues(MESSAGING_FIELDS, stored), problems: {}, saved: true })
  })

  app.post('/settings/messaging', page({ body: MESSAGING_FORM }), async (request, reply) => {
    const session = request.consoleSession!
    const values: FormValues = formOf(request, MESSAGING_FIELDS.map((field) => field.name))
    const read = readFields(MESSAGING_FIELDS, values)
    if (Object.keys(read.problems).length > 0) return await refuseForm(db, reply, session, '/settings', values, read.problems)
    try {
      await changeMessagingSettings(db, config, session.userId, read.values)
    } catch (err) {
      if (!(err instanceof HttpError) || err.code !== 'invalid_sender') throw err
      return await refuseForm(db, reply, session, '/settings', values, { whatsapp_sender: err.message.replace(/^whatsapp_sender: /, '') })
    }
    await formSaved(db, session, '/settings')
    return reply.redirect('/settings?saved=messaging#messaging-title', 303)
  })

  app.post('/settings/signing-secret/reveal', page({ body: formBody({}) }), async (request, reply) => {
    const session = request.consoleSession!
    return await showSettings(reply, session, { secret: (await currentSecret(db, session.userId)).secret, testSecret: await testSecret(db, session.userId), rotated: false })
  })

  app.post('/settings/signing-secret/rotate', page({ body: formBody({}) }), async (request, reply) => {
    const session = request.consoleSession!
    return await showSettings(reply, session, { secret: (await rotateSecret(db, session.userId)).secret, testSecret: await testSecret(db, session.userId), rotated: true })
  })
}
