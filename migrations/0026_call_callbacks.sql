-- Automatic callbacks (an agent's callback_settings; docs/calls.md, "Callbacks"): an outbound phone call that ends
-- with one of the agent's on_outcomes is placed again later, each time a new call linked to the first.
-- One row per callback, from when the end of a call schedules it. The chain is kept here alone, not in columns of
-- calls: a callback's call is the row's call_id, and its callback_of and callback_attempt (in the API) are the row's,
-- so calls is neither altered nor rewritten, and this migration only creates a table.
-- Its state is the guard against placing twice: the job that places it turns `scheduled` into `placed` (or
-- `cancelled`, `failed`) under a row lock, in the transaction that stores the new call, so a job delivered twice
-- finds nothing left to do.
CREATE TABLE call_callbacks (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- The first call of the chain, and the call whose end scheduled this callback (the first, or the callback before).
  callback_of text NOT NULL REFERENCES calls (id) ON DELETE CASCADE,
  after_call_id text NOT NULL REFERENCES calls (id) ON DELETE CASCADE,
  attempt smallint NOT NULL CHECK (attempt BETWEEN 1 AND 5),
  -- The agent's max_attempts when it was scheduled (shown as "attempt n of m").
  max_attempts smallint NOT NULL CHECK (max_attempts BETWEEN 1 AND 5),
  -- The person called: an inbound call from this number to the account cancels the callback.
  to_number text NOT NULL,
  status text NOT NULL DEFAULT 'scheduled' CHECK (status IN ('scheduled', 'placed', 'cancelled', 'failed')),
  -- Why it was cancelled or failed: called_back, agent_deleted, agent_inactive, callbacks_disabled,
  -- max_attempts_lowered, number_gone, no_credits.
  reason text,
  due_at timestamptz NOT NULL,
  -- The call placed (status placed): one callback per call.
  call_id text UNIQUE REFERENCES calls (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  -- A chain's callbacks, in order (a call's detail, GET /v1/call/list?callback_of=).
  UNIQUE (callback_of, attempt)
);
-- An inbound call looks up the scheduled callbacks to its caller's number.
CREATE INDEX call_callbacks_scheduled_idx ON call_callbacks (user_id, to_number) WHERE status = 'scheduled';
-- after_call_id's foreign key: deleting a call (with its account) finds the callbacks it scheduled.
CREATE INDEX call_callbacks_after_call_idx ON call_callbacks (after_call_id);
