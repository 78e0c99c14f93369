-- migrate: no-transaction
-- Contacts (issue 28, docs/contacts.md): the people an account's agents talk to, one row per phone number (E.164)
-- or e-mail address per owner of calls: the account, or within it the customer and workspace its agents name (a
-- caller of one customer's agent is not the same contact for another customer's). Each call names its contact
-- (calls.contact_id, set when the call is created); customer memory reads the contact's earlier calls.
-- Outside a transaction (docs/migrations.md): the foreign key and the index on calls are added without holding
-- calls locked while they scan it. Every step can run again after a start that stopped half-way.
CREATE TABLE IF NOT EXISTS contacts (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  customer_id text REFERENCES customers (id),
  workspace_id text REFERENCES workspaces (id),
  -- Exactly one key: a phone call's other party, or what a web call's dynamic_context names (phone before e-mail).
  phone_number text CHECK (phone_number ~ '^\+[1-9][0-9]{1,14}$'),
  email text CHECK (email = lower(email) AND length(email) <= 254),
  name text CHECK (length(name) BETWEEN 1 AND 200),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  last_call_at timestamptz NOT NULL,
  CONSTRAINT contacts_one_key CHECK (num_nonnulls(phone_number, email) = 1)
);
-- The find-or-create of a new call (INSERT … ON CONFLICT) infers these: absent customer and workspace are '' so
-- that the key holds no NULLs (PostgreSQL 14 has no NULLS NOT DISTINCT).
CREATE UNIQUE INDEX IF NOT EXISTS contacts_phone_key ON contacts (user_id, coalesce(customer_id, ''), coalesce(workspace_id, ''), phone_number) WHERE phone_number IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS contacts_email_key ON contacts (user_id, coalesce(customer_id, ''), coalesce(workspace_id, ''), email) WHERE email IS NOT NULL;
-- The listing's order: the latest call first.
CREATE INDEX IF NOT EXISTS contacts_user_last_call_idx ON contacts (user_id, last_call_at, id);

ALTER TABLE calls ADD COLUMN IF NOT EXISTS contact_id text;
-- NOT VALID: added at once under a short lock; the next step checks the existing calls (all NULL) without blocking writes.
-- Deleting a contact unlinks its calls: they stay, and no later call reads them as memory.
ALTER TABLE calls DROP CONSTRAINT IF EXISTS calls_contact_id_fkey;
ALTER TABLE calls ADD CONSTRAINT calls_contact_id_fkey FOREIGN KEY (contact_id) REFERENCES contacts (id) ON DELETE SET NULL NOT VALID;

-- migrate: step
ALTER TABLE calls VALIDATE CONSTRAINT calls_contact_id_fkey;

-- migrate: step
-- A contact's calls newest first (its page, its memory) and the unlinking of a deleted contact's calls. Built
-- concurrently: calls stay writable meanwhile (docs/migrations.md).
CREATE INDEX CONCURRENTLY IF NOT EXISTS calls_contact_start_idx ON calls (contact_id, start_timestamp, id) WHERE contact_id IS NOT NULL;
