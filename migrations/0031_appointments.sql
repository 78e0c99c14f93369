-- Appointments (issue 29, docs/appointments.md): what the built-in `appointment_booking` tool books during calls,
-- one row per appointment, kept when it is cancelled. A tool's booked appointments never overlap, buffer included:
-- the exclusion constraint decides between concurrent bookings of one time (the first to commit wins; the other
-- gets an exclusion violation), whatever the process or replica that books.
-- btree_gist gives gist the equality on text that the constraint's tool_id needs; it is a trusted extension
-- (PostgreSQL 13 and later), so a database owner without superuser rights may create it.
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE appointments (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- The agent's workspace when it was booked (the console's workspace rule); the agent and the tool are named by id
  -- only, as calls name their agent: an appointment outlives the tool that booked it.
  workspace_id text REFERENCES workspaces (id) ON DELETE SET NULL,
  agent_id text NOT NULL CHECK (agent_id ~ '^[0-9a-f]{24}$'),
  tool_id text NOT NULL CHECK (tool_id ~ '^[0-9a-f]{24}$'),
  call_id text REFERENCES calls (id) ON DELETE SET NULL,
  contact_id text REFERENCES contacts (id) ON DELETE SET NULL,
  starts_at timestamptz NOT NULL,
  ends_at timestamptz NOT NULL,
  -- The end plus the tool's buffer when it was booked (or moved): the time no other appointment of the tool may start in.
  blocked_until timestamptz NOT NULL,
  time_zone text NOT NULL CHECK (length(time_zone) BETWEEN 1 AND 100),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  email text CHECK (email = lower(email) AND length(email) <= 254),
  phone text CHECK (phone ~ '^\+[1-9][0-9]{1,14}$'),
  notes text CHECK (length(notes) <= 2000),
  status text NOT NULL DEFAULT 'booked' CHECK (status IN ('booked', 'cancelled')),
  -- iCalendar's SEQUENCE: one more at every move and at the cancellation, so that calendars take the latest version.
  sequence integer NOT NULL DEFAULT 0 CHECK (sequence >= 0),
  cancel_reason text CHECK (length(cancel_reason) <= 500),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  cancelled_at timestamptz,
  CONSTRAINT appointments_times CHECK (ends_at > starts_at AND blocked_until >= ends_at),
  CONSTRAINT appointments_cancelled CHECK ((status = 'cancelled') = (cancelled_at IS NOT NULL)),
  CONSTRAINT appointments_no_overlap EXCLUDE USING gist (tool_id WITH =, tstzrange(starts_at, blocked_until) WITH &&) WHERE (status = 'booked')
);
-- The listing (GET /v1/appointments, the console): by start time within the account, optionally one agent's.
CREATE INDEX appointments_user_starts_idx ON appointments (user_id, starts_at, id);
CREATE INDEX appointments_agent_starts_idx ON appointments (agent_id, starts_at, id);
-- A contact's and a call's appointments, and the unlinking when a contact or a call is deleted.
CREATE INDEX appointments_contact_idx ON appointments (contact_id, starts_at) WHERE contact_id IS NOT NULL;
CREATE INDEX appointments_call_idx ON appointments (call_id) WHERE call_id IS NOT NULL;
