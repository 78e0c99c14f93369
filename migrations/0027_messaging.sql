-- Messages an account sends by e-mail, SMS and WhatsApp (docs/messaging.md): the live actions during a call, the
-- after-call message channels and tests. Every message is logged here, also one a limit refused. A message is first
-- stored `sending` under the account's lock (its place within the limits), then set to what became of it.
CREATE TABLE messages (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- A message sent for a call is part of the call's record: it goes with the call.
  call_id text REFERENCES calls (id) ON DELETE CASCADE,
  -- The action that sent it (no foreign key: the log outlives a deleted action, as the deliveries' does).
  action_id text,
  origin text NOT NULL CHECK (origin IN ('live', 'after_call', 'test')),
  channel text NOT NULL CHECK (channel IN ('email', 'sms', 'chat')),
  -- The From address or number; null when none could be chosen (the message was refused).
  sender text,
  recipient text NOT NULL,
  subject text,
  body text NOT NULL,
  status text NOT NULL CHECK (status IN ('sending', 'sent', 'recorded', 'failed', 'refused')),
  error text,
  -- Twilio's message sid (SM…) or the SMTP Message-ID.
  carrier_message_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- The account's log, newest first (GET /v1/messages), and the last hour's messages that the per-account limit counts.
CREATE INDEX messages_user_created_idx ON messages (user_id, created_at DESC, id DESC);
-- A call's messages: the call page, the per-call limit.
CREATE INDEX messages_call_idx ON messages (call_id, created_at DESC, id DESC) WHERE call_id IS NOT NULL;

-- Per-account messaging settings: the WhatsApp sender (one of the account's Twilio numbers) and the display name and
-- Reply-To of its e-mails (the From address is always the installation's MAIL_FROM).
CREATE TABLE messaging_settings (
  user_id text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  whatsapp_sender text CHECK (whatsapp_sender ~ '^\+[1-9][0-9]{1,14}$'),
  email_from_name text,
  email_reply_to text,
  updated_at timestamptz NOT NULL DEFAULT now()
);
