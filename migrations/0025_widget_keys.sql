-- The website widget (docs/widget.md). A widget key is public by design (it sits in a site's HTML), so it is stored as
-- it is, to be shown again; it only starts web calls of its agent, from the agent's allowed_origins, within a budget
-- per client address. One key per agent: creating another replaces it.
CREATE TABLE widget_keys (
  agent_id text PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  key text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Hourly budgets, counted in the database so that every process shares them: one row per key, counted with one
-- atomic upsert (db/budgets.ts), a window opened by the first use and lasting an hour; housekeeping forgets ended
-- windows. Keys: `widget:<agent>:<address>` (web calls started with a widget key, WIDGET_CALLS_PER_ADDRESS_HOUR),
-- `live-requests:<account>` (api_call requests during calls, LIVE_REQUESTS_PER_ACCOUNT_HOUR).
CREATE TABLE hourly_budgets (
  key text PRIMARY KEY,
  used integer NOT NULL,
  window_ends_at timestamptz NOT NULL
);
CREATE INDEX hourly_budgets_window_ends_at_idx ON hourly_budgets (window_ends_at);
