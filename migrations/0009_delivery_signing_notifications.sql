-- Standard Webhooks signing secrets, one current per account (expires_at NULL) and, after a rotation,
-- the previous one until its overlap ends: requests are signed with both meanwhile.
CREATE TABLE webhook_secrets (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  secret text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz
);
CREATE UNIQUE INDEX webhook_secrets_current_idx ON webhook_secrets (user_id) WHERE expires_at IS NULL;
CREATE INDEX webhook_secrets_user_idx ON webhook_secrets (user_id, created_at);

-- Failure e-mails sent per source (an action, or an agent's webhook), for the 10-an-hour and 30-a-day limits.
CREATE TABLE delivery_notifications (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  source_key text NOT NULL,
  delivery_row_id text NOT NULL,
  final boolean NOT NULL,
  email_id text NOT NULL,
  sent_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX delivery_notifications_source_idx ON delivery_notifications (source_key, sent_at);
