-- Account resources: customers, workspaces and their members, the subscription with its credit ledger,
-- phone numbers, and the record of every e-mail the server sends.

-- An agency's sub-accounts. Records of other modules name one through `customer_id`.
CREATE TABLE customers (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name text NOT NULL,
  email text,
  phone_number text CHECK (phone_number ~ '^\+[1-9][0-9]{1,14}$'),
  metadata jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX customers_user_id_idx ON customers (user_id, id);

CREATE TABLE workspaces (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name text NOT NULL,
  description text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workspaces_user_id_idx ON workspaces (user_id, id);

-- A member is known by e-mail address (stored lowercase) until they accept; `member_user_id` is the
-- Switchboard user who accepted. The owner is a member too, active from the start.
CREATE TABLE workspace_members (
  workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  email text NOT NULL CHECK (email = lower(email)),
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  status text NOT NULL CHECK (status IN ('invited', 'active')),
  member_user_id text REFERENCES users (id) ON DELETE CASCADE,
  invited_at timestamptz NOT NULL DEFAULT now(),
  joined_at timestamptz,
  PRIMARY KEY (workspace_id, email)
);
CREATE INDEX workspace_members_email_idx ON workspace_members (email);

-- One row per account, made on first use. Its row lock serialises every change of the account's credits.
CREATE TABLE subscriptions (
  user_id text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  plan text NOT NULL DEFAULT 'free' CHECK (plan IN ('free', 'pro', 'enterprise')),
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'past_due', 'canceled')),
  auto_top_up_enabled boolean NOT NULL DEFAULT false,
  auto_top_up_threshold bigint NOT NULL DEFAULT 100 CHECK (auto_top_up_threshold >= 0),
  top_up_amount bigint NOT NULL DEFAULT 1000 CHECK (top_up_amount > 0),
  period_anchor timestamptz NOT NULL DEFAULT now(),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Every change of an account's credits is a row; the balance is their sum and is never stored.
CREATE TABLE credit_ledger (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('grant', 'call_charge', 'top_up', 'adjustment')),
  amount bigint NOT NULL CHECK (amount <> 0),
  call_id text CHECK (call_id ~ '^[0-9a-f]{24}$'),
  description text NOT NULL DEFAULT '',
  -- clock_timestamp: a charge and its top-up in one transaction keep their order.
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CHECK ((kind = 'call_charge') = (amount < 0) OR kind = 'adjustment')
);
CREATE INDEX credit_ledger_user_id_idx ON credit_ledger (user_id, created_at);

-- Numbers are unique across the installation: an inbound call must reach exactly one account.
-- Agent ids carry no foreign key: agents belong to their own module, which checks them on write.
-- Carrier credentials and the SIP password are secrets: no route ever returns them.
CREATE TABLE phone_numbers (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  phone_number text NOT NULL UNIQUE CHECK (phone_number ~ '^\+[1-9][0-9]{1,14}$'),
  source text NOT NULL CHECK (source IN ('purchased', 'imported', 'sip')),
  carrier text NOT NULL CHECK (carrier IN ('sandbox', 'twilio', 'sip')),
  carrier_number_id text,
  carrier_account_id text,
  carrier_auth_token text,
  nickname text NOT NULL DEFAULT '',
  inbound_agent_id text CHECK (inbound_agent_id ~ '^[0-9a-f]{24}$'),
  outbound_agent_id text CHECK (outbound_agent_id ~ '^[0-9a-f]{24}$'),
  customer_id text REFERENCES customers (id),
  workspace_id text REFERENCES workspaces (id),
  sip_termination_uri text,
  sip_username text,
  sip_password text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX phone_numbers_user_id_idx ON phone_numbers (user_id, id);
CREATE INDEX phone_numbers_customer_id_idx ON phone_numbers (customer_id) WHERE customer_id IS NOT NULL;
CREATE INDEX phone_numbers_workspace_id_idx ON phone_numbers (workspace_id) WHERE workspace_id IS NOT NULL;

-- Every message the server sends or would send: `sent` through SMTP, `recorded` when no SMTP server is
-- configured, `failed` when the SMTP server refused it or could not be reached.
CREATE TABLE emails (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  kind text NOT NULL,
  to_address text NOT NULL,
  subject text NOT NULL,
  body_text text NOT NULL,
  status text NOT NULL CHECK (status IN ('sent', 'recorded', 'failed')),
  error text,
  message_id text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX emails_user_id_idx ON emails (user_id, created_at);
