-- The web console (docs/console.md): passwords, browser sessions, one-time sign-in links, failed sign-ins.

-- A self-describing scrypt string (`scrypt$N$r$p$salt$hash`); NULL: no password yet (sign in by a link).
ALTER TABLE users ADD COLUMN password_hash text;

-- A browser's session. The cookie holds a random id; only its SHA-256 is kept, so a copy of this table
-- signs nobody in. A session ends when idle too long, at expires_at, at sign-out, or when its user's password
-- changes elsewhere.
CREATE TABLE console_sessions (
  id_hash text PRIMARY KEY CHECK (id_hash ~ '^[0-9a-f]{64}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  csrf_token text NOT NULL,
  -- Signed in by a login link: a password may be set without the current one for a short while.
  via_link boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX console_sessions_user_id_idx ON console_sessions (user_id);

-- One-time sign-in links (`npm run cli -- user login-link`), kept as SHA-256 hashes.
CREATE TABLE login_links (
  token_hash text PRIMARY KEY CHECK (token_hash ~ '^[0-9a-f]{64}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
CREATE INDEX login_links_user_id_idx ON login_links (user_id);

-- Failed sign-ins, counted per e-mail address and per client address over a window. In the database rather
-- than in memory so that replicas behind one load balancer share the count.
CREATE TABLE sign_in_failures (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  bucket text NOT NULL,
  failed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sign_in_failures_bucket_idx ON sign_in_failures (bucket, failed_at);
