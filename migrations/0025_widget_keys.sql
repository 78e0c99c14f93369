-- The website widget (docs/widget.md). A widget key is public by design (it sits in a site's HTML), so it is stored as
-- it is, to be shown again; it only starts web calls of its agent, from the agent's allowed_origins, within a budget
-- per client address. One key per agent: creating another replaces it.
CREATE TABLE widget_keys (
  agent_id text PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  key text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Web calls started with an agent's widget key per client address, in windows of an hour that the first call opens
-- (WIDGET_CALLS_PER_ADDRESS_HOUR). One row per agent and address, counted with one atomic upsert; housekeeping
-- forgets windows that have ended.
CREATE TABLE widget_call_budgets (
  agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  address text NOT NULL,
  calls integer NOT NULL,
  window_ends_at timestamptz NOT NULL,
  PRIMARY KEY (agent_id, address)
);
CREATE INDEX widget_call_budgets_window_ends_at_idx ON widget_call_budgets (window_ends_at);
