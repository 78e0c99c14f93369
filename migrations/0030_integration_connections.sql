-- Connected accounts act during calls (issue 29). A connection is made with an API key or through OAuth 2.0; an
-- OAuth access token expires and is refreshed with the refresh token (both in `credentials`, sealed). `status`
-- turns `revoked` when the service refuses the credentials for good: the account must be connected again.
ALTER TABLE integrations
  ADD COLUMN method text NOT NULL DEFAULT 'api_key' CHECK (method IN ('api_key', 'oauth')),
  ADD COLUMN status text NOT NULL DEFAULT 'connected' CHECK (status IN ('connected', 'revoked')),
  ADD COLUMN status_reason text,
  ADD COLUMN expires_at timestamptz,
  ADD COLUMN refreshed_at timestamptz;

-- Pending OAuth authorizations: the state sent to the provider (stored as its SHA-256), the PKCE verifier (sealed),
-- and whose they are: the console session that asked (null when asked through the API), so that a callback
-- completes only in the session that started it. Used once; expired ones are refused and swept.
CREATE TABLE oauth_states (
  state_hash text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  session_id text,
  provider text NOT NULL CHECK (provider IN ('calendar_one', 'calendar_two', 'booking_one', 'booking_two', 'crm')),
  code_verifier text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX oauth_states_expires_idx ON oauth_states (expires_at);

-- A CRM tool logs each call in the connected CRM after it: a post-call delivery of kind `crm` (the tool's id in action_id).
ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS webhook_deliveries_kind_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_kind_check
  CHECK (kind IN ('agent_webhook', 'api_call', 'send_email', 'send_sms', 'send_chat', 'crm')) NOT VALID;
ALTER TABLE webhook_deliveries VALIDATE CONSTRAINT webhook_deliveries_kind_check;
