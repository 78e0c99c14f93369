-- The do-not-call list (issue 31, docs/contacts.md "Do not call"): the numbers an account's agents must not call.
-- One list per account (not per customer or workspace): a person who asked not to be called is not called by any of
-- the account's agents. make-phone-call refuses a listed number, a scheduled callback to one is cancelled, a
-- campaign skips it. Filled through the API and the console, and by the do_not_call tool when a caller asks.
CREATE TABLE do_not_call (
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  phone_number text NOT NULL CHECK (phone_number ~ '^\+[1-9][0-9]{1,14}$'),
  -- Who listed it: api, console, call (the caller asked, through the tool: call_id names the call), campaign.
  source text NOT NULL CHECK (source IN ('api', 'console', 'call', 'campaign')),
  -- The call in which the caller asked; the entry outlives the call's deletion.
  call_id text REFERENCES calls (id) ON DELETE SET NULL,
  note text CHECK (length(note) <= 500),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, phone_number)
);
-- The listing's order: the newest first.
CREATE INDEX do_not_call_user_created_idx ON do_not_call (user_id, created_at, phone_number);
-- A call's deletion sets call_id to null: found by this index, not by a scan.
CREATE INDEX do_not_call_call_idx ON do_not_call (call_id) WHERE call_id IS NOT NULL;

-- How many numbers each account lists: the limit (docs/contacts.md) is checked on this row, kept with each add and
-- removal, instead of counting up to 100,000 entries under the list's lock at every add.
CREATE TABLE do_not_call_counts (
  user_id text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  size integer NOT NULL CHECK (size >= 0)
);

-- The do_not_call tool type (capabilities/types/do-not-call.ts) joins the tool types an agent may have.
ALTER TABLE agent_tools DROP CONSTRAINT agent_tools_tool_type_check;
ALTER TABLE agent_tools ADD CONSTRAINT agent_tools_tool_type_check CHECK (tool_type IN ('api_rag', 'appointment_booking', 'call_forwarding',
  'end_call', 'calendar_one', 'calendar_two', 'booking_one', 'booking_two', 'crm', 'agent_transfer', 'mcp', 'do_not_call'));
