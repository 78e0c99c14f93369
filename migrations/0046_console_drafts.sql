-- A console form that was refused (src/modules/console/drafts.ts): its values and problems kept for the session
-- that sent them, so that the POST answers with a redirect (Post/Redirect/Get) and the page it leads to shows the
-- form again. The redirect names the draft (?draft=<id>): a reload shows it again, another tab does not see it.
-- A session's drafts go with it; one form (path) keeps its latest draft only, and drafts older than a day are
-- deleted when the next one is written.
CREATE TABLE console_drafts (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  session_hash text NOT NULL REFERENCES console_sessions (id_hash) ON DELETE CASCADE,
  path text NOT NULL,
  form_values jsonb NOT NULL,
  problems jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX console_drafts_session_path_idx ON console_drafts (session_hash, path);
CREATE INDEX console_drafts_created_at_idx ON console_drafts (created_at);
