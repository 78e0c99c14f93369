-- Post-call deliveries: one row per source (the agent's webhook_url, each active api_call action) and call,
-- stored with its first attempt job in the analysis transaction. The request (method, URL, body) is frozen
-- at enqueue; an api_call's headers are read from the action at each attempt. Attempts are appended to
-- `attempts` under the row lock.
CREATE TABLE webhook_deliveries (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  delivery_id uuid NOT NULL UNIQUE,
  correlation_id uuid NOT NULL,
  call_id text NOT NULL,
  agent_id text NOT NULL,
  -- The action of an api_call delivery (no foreign key: the log outlives a deleted action).
  action_id text,
  kind text NOT NULL CHECK (kind IN ('agent_webhook', 'api_call')),
  name text NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  method text NOT NULL,
  url text,
  -- json, not jsonb: the text is kept as it was made, so every attempt sends (and signs) the same bytes.
  body json,
  -- Values of the {{variables}}, kept to render the action's headers at each attempt.
  variables jsonb,
  -- Pauses in seconds before each scheduled attempt after the first; attempts_max is its length + 1.
  schedule integer[] NOT NULL,
  attempts_max integer NOT NULL,
  -- Scheduled attempts done; manual resends add to attempts_made only.
  scheduled_made integer NOT NULL DEFAULT 0,
  attempts_made integer NOT NULL DEFAULT 0,
  attempts jsonb NOT NULL DEFAULT '[]',
  next_attempt_at timestamptz,
  delivered_at timestamptz,
  -- When the request (url, body, variables) was deleted by the retention job; a purged delivery cannot be resent.
  purged_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_user_created_idx ON webhook_deliveries (user_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_user_status_idx ON webhook_deliveries (user_id, status, created_at DESC);
CREATE INDEX webhook_deliveries_call_idx ON webhook_deliveries (call_id);
CREATE INDEX webhook_deliveries_retention_idx ON webhook_deliveries (updated_at) WHERE purged_at IS NULL AND status <> 'pending';
