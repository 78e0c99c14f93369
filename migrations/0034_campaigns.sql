-- Outbound campaigns (docs/campaigns.md): an agent calls a list of contacts, within calling hours in each contact's
-- time zone and within caps on concurrent calls and new calls a minute, retrying unanswered contacts.
-- The dialler (a pg-boss tick per campaign) claims due contacts under the campaign's row lock and the account's
-- advisory lock, and starts each call in the transaction that marks its contact `calling`: so several worker
-- processes share a campaign without dialling a contact twice, and a process that dies loses nothing.
CREATE TABLE campaigns (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- Not a foreign key: an agent deleted meanwhile pauses the campaign (status_reason agent_deleted).
  agent_id text NOT NULL,
  name text NOT NULL,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'cancelled', 'completed')),
  -- Why the dialler paused it (agent_deleted, agent_inactive, no_numbers, no_credits); null when a person did.
  status_reason text,
  -- The pool of the account's numbers (E.164) that calls are placed from, in turn.
  from_numbers text[] NOT NULL CHECK (cardinality(from_numbers) BETWEEN 1 AND 100),
  start_at timestamptz NOT NULL,
  -- {"mon": [{"start": "09:00", "end": "17:00"}], …}: the local times each weekday when contacts may be called.
  calling_hours jsonb NOT NULL,
  -- The zones of its contacts, so the dialler asks only for contacts whose zone is within calling hours now.
  timezones text[] NOT NULL,
  max_concurrent_calls integer NOT NULL CHECK (max_concurrent_calls BETWEEN 1 AND 10000),
  max_calls_per_minute integer NOT NULL CHECK (max_calls_per_minute BETWEEN 1 AND 100000),
  -- The campaign's own retries ({max_attempts, retry_delay_minutes, on_outcomes}); null: the agent's callback_settings.
  retry_settings jsonb,
  ring_timeout_seconds integer,
  -- The CSV's columns besides the phone number, in order (the results CSV repeats them).
  columns text[] NOT NULL DEFAULT '{}',
  -- The tick job the dialler expects next: a tick carrying another token is a stale duplicate and stops.
  tick_token text,
  completed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX campaigns_user_idx ON campaigns (user_id, id);

CREATE TABLE campaign_contacts (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  campaign_id text NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- The row of the upload it came from (1 = the first row after the header).
  row_number integer NOT NULL,
  phone_number text NOT NULL,
  timezone text NOT NULL,
  -- The row's other columns: each call's dynamic_context.
  columns jsonb NOT NULL DEFAULT '{}',
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'calling', 'done', 'cancelled')),
  -- How it ended (status done): success, no_answer, busy, voicemail, failed, do_not_call.
  outcome text,
  attempts integer NOT NULL DEFAULT 0,
  -- When it may be called (again): the campaign's start, then a retry's time.
  due_at timestamptz NOT NULL,
  last_call_id text REFERENCES calls (id) ON DELETE SET NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (campaign_id, phone_number)
);
-- The dialler's claim: due contacts of a campaign, by time zone.
CREATE INDEX campaign_contacts_due_idx ON campaign_contacts (campaign_id, due_at) WHERE status = 'pending';
-- Calls in progress, per campaign and per account (the concurrency caps).
CREATE INDEX campaign_contacts_calling_idx ON campaign_contacts (user_id, campaign_id) WHERE status = 'calling';
CREATE INDEX campaign_contacts_row_idx ON campaign_contacts (campaign_id, row_number);

-- One row per call a campaign placed: the caps on new calls a minute count them, and a contact's history is here.
CREATE TABLE campaign_dials (
  campaign_id text NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  contact_id text NOT NULL REFERENCES campaign_contacts (id) ON DELETE CASCADE,
  call_id text NOT NULL UNIQUE,
  attempt integer NOT NULL,
  dialled_at timestamptz NOT NULL,
  -- A contact's attempt is dialled once.
  PRIMARY KEY (contact_id, attempt)
);
CREATE INDEX campaign_dials_campaign_idx ON campaign_dials (campaign_id, dialled_at);
CREATE INDEX campaign_dials_user_idx ON campaign_dials (user_id, dialled_at);

-- The campaign a call was placed for: its end is the campaign's to judge (retries), not the agent's callbacks.
ALTER TABLE calls ADD COLUMN campaign_id text REFERENCES campaigns (id) ON DELETE SET NULL;
CREATE INDEX calls_campaign_idx ON calls (campaign_id) WHERE campaign_id IS NOT NULL;
