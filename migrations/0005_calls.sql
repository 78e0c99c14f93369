-- Call records. An agent's calls outlive the agent: agent_id is kept without a foreign key and the
-- agent's name is copied at call time.
CREATE TABLE calls (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  agent_id text NOT NULL CHECK (agent_id ~ '^[0-9a-f]{24}$'),
  agent_name text NOT NULL,
  customer_id text CHECK (customer_id ~ '^[0-9a-f]{24}$'),
  workspace_id text CHECK (workspace_id ~ '^[0-9a-f]{24}$'),
  call_type text NOT NULL CHECK (call_type IN ('phone', 'web')),
  direction text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
  call_status text NOT NULL CHECK (call_status IN ('started', 'pending', 'success', 'failed')),
  call_from text,
  call_to text,
  start_timestamp timestamptz NOT NULL,
  end_timestamp timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX calls_user_start_idx ON calls (user_id, start_timestamp);
CREATE INDEX calls_agent_start_idx ON calls (agent_id, start_timestamp);
