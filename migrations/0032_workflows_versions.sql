-- Workflows, agent versions and tests (issue 30).
-- An agent may hold a workflow (steps and transitions, agents/workflow.ts) instead of talking from one prompt.
ALTER TABLE agents ADD COLUMN workflow jsonb;
-- The agent's latest version (0: none written yet, an agent from before versions: the first is written on use).
ALTER TABLE agents ADD COLUMN version integer NOT NULL DEFAULT 0 CHECK (version >= 0);

-- Every change of an agent (its settings, LLM configuration, tools, actions, workflow) writes an immutable version:
-- one JSON snapshot of what its calls run on (agents/versions.ts).
CREATE TABLE agent_versions (
  agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  version integer NOT NULL CHECK (version > 0),
  snapshot jsonb NOT NULL,
  change text NOT NULL,
  restored_from integer,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, version)
);

-- The version a call ran; the workflow's path and variables of a call that ran one.
ALTER TABLE calls ADD COLUMN agent_version integer;
ALTER TABLE calls ADD COLUMN workflow jsonb;

-- A number may run a chosen version of its agents instead of the latest.
ALTER TABLE phone_numbers ADD COLUMN inbound_agent_version integer CHECK (inbound_agent_version > 0);
ALTER TABLE phone_numbers ADD COLUMN outbound_agent_version integer CHECK (outbound_agent_version > 0);

-- An after-call API step of a workflow is a post-call delivery of its own kind (the step's id in action_id).
ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS webhook_deliveries_kind_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_kind_check
  CHECK (kind IN ('agent_webhook', 'api_call', 'send_email', 'send_sms', 'send_chat', 'crm', 'workflow_step')) NOT VALID;
ALTER TABLE webhook_deliveries VALIDATE CONSTRAINT webhook_deliveries_kind_check;
