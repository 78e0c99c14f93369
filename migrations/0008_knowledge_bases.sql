-- Knowledge bases: uploaded documents, their bytes, the passages read from them, and the agents that
-- search them. Everything lives in PostgreSQL so that a deployment needs no volume or object store.

CREATE TABLE knowledge_bases (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  customer_id text REFERENCES customers (id),
  workspace_id text REFERENCES workspaces (id),
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
  description text NOT NULL CHECK (char_length(description) BETWEEN 1 AND 300),
  folder text NOT NULL DEFAULT '' CHECK (char_length(folder) <= 50),
  -- BCP-47 tag as given, and the text search configuration it maps to ('simple' where none fits).
  language text NOT NULL,
  search_config regconfig NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX knowledge_bases_user_id_idx ON knowledge_bases (user_id, id);

CREATE TABLE knowledge_base_files (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- Deferred: an upload streams its files before the form fields that name the knowledge base may have
  -- arrived, so the knowledge base row is written last in the same transaction.
  knowledge_base_id text NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
  file_name text NOT NULL,
  file_type text NOT NULL CHECK (file_type IN ('pdf', 'docx', 'txt', 'markdown', 'csv', 'html')),
  file_size bigint NOT NULL CHECK (file_size > 0),
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'processing', 'ready', 'failed')),
  error text,
  passage_count integer NOT NULL DEFAULT 0,
  -- clock_timestamp(), not now(): the files of one upload (one transaction) keep their order.
  uploaded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  processed_at timestamptz
);
CREATE INDEX knowledge_base_files_kb_idx ON knowledge_base_files (knowledge_base_id, uploaded_at, id);

-- A file's bytes in parts of at most 1 MB, so that neither the upload nor PostgreSQL holds a whole
-- file in one value while it streams in.
CREATE TABLE knowledge_base_file_parts (
  file_id text NOT NULL REFERENCES knowledge_base_files (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  n integer NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (file_id, n)
);

-- What search finds: a file's text in passages, each with its place in the file.
CREATE TABLE knowledge_base_passages (
  file_id text NOT NULL REFERENCES knowledge_base_files (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  knowledge_base_id text NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
  position integer NOT NULL,
  -- 1-based page of a PDF; NULL for the other types.
  page integer,
  char_start integer NOT NULL,
  char_end integer NOT NULL,
  content text NOT NULL,
  tsv tsvector NOT NULL,
  PRIMARY KEY (file_id, position)
);
CREATE INDEX knowledge_base_passages_tsv_idx ON knowledge_base_passages USING gin (tsv);
CREATE INDEX knowledge_base_passages_kb_idx ON knowledge_base_passages (knowledge_base_id);

-- Which agents use which knowledge bases; an agent's `knowledge_base` and a knowledge base's
-- `agent_names` are both read from here, so they cannot disagree.
CREATE TABLE knowledge_base_agents (
  knowledge_base_id text NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
  agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  assigned_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (knowledge_base_id, agent_id)
);
CREATE INDEX knowledge_base_agents_agent_idx ON knowledge_base_agents (agent_id);
