-- Workspaces in the console (docs/console.md, "Workspaces and members"): the workspace a browser session works
-- in, and the invitation e-mail's one-time link.

-- NULL: the person's own account. Checked against an active membership on every request, so that a removed
-- member loses the workspace at once.
ALTER TABLE console_sessions ADD COLUMN workspace_id text REFERENCES workspaces (id) ON DELETE SET NULL;

-- The invitation link's token, kept as a SHA-256 hash, and when it stops working; cleared when accepted.
ALTER TABLE workspace_members ADD COLUMN invite_token_hash text CHECK (invite_token_hash ~ '^[0-9a-f]{64}$');
ALTER TABLE workspace_members ADD COLUMN invite_expires_at timestamptz;
CREATE UNIQUE INDEX workspace_members_invite_token_idx ON workspace_members (invite_token_hash) WHERE invite_token_hash IS NOT NULL;
