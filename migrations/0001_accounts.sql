-- Accounts and their API keys. Keys are stored only as SHA-256 hashes; the prefix is for display.
CREATE TABLE users (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  email text NOT NULL,
  name text NOT NULL DEFAULT '',
  language text NOT NULL DEFAULT 'en',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE api_keys (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  key_hash text NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
  prefix text NOT NULL,
  name text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);
CREATE INDEX api_keys_user_id_idx ON api_keys (user_id);
