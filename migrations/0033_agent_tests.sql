-- Tests of an agent (issue 30, docs/testing.md): scenarios kept per agent, runs of them against an agent version,
-- one result per scenario per run. Shapes of the jsonb columns: src/modules/agent-tests/shapes.ts.
CREATE TABLE agent_tests (
  id text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  name text NOT NULL,
  -- { type: 'script', lines } or { type: 'persona', persona, max_turns }
  caller jsonb NOT NULL,
  mocks jsonb NOT NULL DEFAULT '[]',
  expectations jsonb NOT NULL,
  dynamic_context jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_tests_agent ON agent_tests (agent_id, created_at);

-- A run: written when it starts (status running, which counts against the account's runs at once) and completed
-- with its counts when every scenario has run.
CREATE TABLE agent_test_runs (
  id text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  agent_version integer NOT NULL,
  engine text NOT NULL CHECK (engine IN ('text', 'simulator')),
  status text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'passed', 'failed')),
  passed integer NOT NULL DEFAULT 0,
  failed integer NOT NULL DEFAULT 0,
  started_at timestamptz NOT NULL DEFAULT now(),
  duration_ms integer
);
CREATE INDEX agent_test_runs_agent ON agent_test_runs (agent_id, started_at DESC);
CREATE INDEX agent_test_runs_running ON agent_test_runs (user_id) WHERE status = 'running';

-- One result per scenario of a run. The scenario's name is kept: a result outlives its scenario's edits and removal.
CREATE TABLE agent_test_results (
  run_id text NOT NULL REFERENCES agent_test_runs (id) ON DELETE CASCADE,
  position integer NOT NULL,
  scenario_id text NOT NULL,
  scenario_name text NOT NULL,
  status text NOT NULL CHECK (status IN ('passed', 'failed', 'error')),
  -- [{ expectation, status: passed | failed | not_judged, reason }]
  expectations jsonb NOT NULL,
  transcript jsonb NOT NULL,
  end_reason text,
  caller_turns integer NOT NULL,
  answer_ms jsonb NOT NULL,
  duration_ms integer NOT NULL,
  error text,
  PRIMARY KEY (run_id, position),
  UNIQUE (run_id, scenario_id)
);
