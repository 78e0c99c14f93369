import type { Test } from 'tap'
import type { DB } from '../../src/db/database.ts'
import { newId } from '../../src/db/ids.ts'
import { conflict } from '../../src/http/errors.ts'
import { createLogger } from '../../src/logger.ts'
import { createMailer } from '../../src/mail/mailer.ts'
import type { MessagingDeps, OutgoingMessage } from '../../src/modules/messaging/send.ts'
import { insertPhoneNumber } from '../../src/modules/phone-numbers/queries.ts'
import { createAccount, setup } from './app.ts'
import { sid, startTwilioStandIn, type TwilioStandIn } from './twilio-stand-in.ts'

/** The Twilio account the test's numbers were imported from (with its credentials). */
export const TWILIO_SID = sid('AC')
export const TWILIO_TOKEN = 'messaging-auth-token'

/** The app, an account, the Twilio stand-in (TWILIO_API_URL) and the messaging module's dependencies. */
export async function messagingSetup (t: Test, env: Record<string, string> = {}) {
  const twilio = await startTwilioStandIn(t)
  twilio.addAccount(TWILIO_SID, TWILIO_TOKEN)
  const ctx = await setup(t, { TWILIO_API_URL: twilio.url, ...env })
  const account = await createAccount(ctx.db)
  const log = createLogger(ctx.config)
  const mailer = createMailer(ctx.db, ctx.config, log)
  t.teardown(() => mailer.close())
  const deps: MessagingDeps = { db: ctx.db, config: ctx.config, log, mailer }
  return { ...ctx, ...account, twilio, deps }
}

/**
 * A number of the account: on Twilio (imported with the test account's credentials, and held at the stand-in), the
 * sandbox, or a SIP trunk.
 */
export async function addNumber (db: DB, userId: string, phoneNumber: string, carrier: 'twilio' | 'sandbox' | 'sip', twilio?: TwilioStandIn) {
  if (carrier === 'twilio') twilio?.hold(TWILIO_SID, phoneNumber)
  return await insertPhoneNumber(db, {
    id: newId(),
    user_id: userId,
    phone_number: phoneNumber,
    source: carrier === 'sip' ? 'sip' : 'imported',
    carrier,
    carrier_number_id: carrier === 'twilio' ? sid('PN') : null,
    carrier_account_id: carrier === 'twilio' ? TWILIO_SID : null,
    carrier_auth_token: carrier === 'twilio' ? TWILIO_TOKEN : null,
    sip_termination_uri: carrier === 'sip' ? 'sip:trunk.example.com' : null
  }, conflict('number taken'))
}

/** A test message of the account: an SMS to +15105550123 unless told otherwise. */
export const outgoing = (userId: string, message: Partial<OutgoingMessage> = {}): OutgoingMessage =>
  ({ userId, callId: null, origin: 'test', actionId: null, channel: 'sms', to: '+15105550123', text: 'Hello from the test', ...message })
