-- Call records. An agent's calls outlive the agent: agent_id is kept without a foreign key and the
-- agent's name is copied at call time.
CREATE TABLE calls (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  agent_id text NOT NULL CHECK (agent_id ~ '^[0-9a-f]{24}$'),
  agent_name text NOT NULL,
  customer_id text REFERENCES customers (id),
  workspace_id text REFERENCES workspaces (id),
  call_type text NOT NULL CHECK (call_type IN ('phone', 'web')),
  direction text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
  call_status text NOT NULL CHECK (call_status IN ('started', 'pending', 'success', 'failed')),
  call_from text,
  call_to text,
  start_timestamp timestamptz NOT NULL,
  end_timestamp timestamptz,
  -- Set when the call ends; aggregates add it up rather than subtracting timestamps per row.
  duration_ms bigint CHECK (duration_ms >= 0),
  recording_url text,
  disconnection_reason text,
  sentiment text CHECK (sentiment IN ('positive', 'negative', 'neutral')),
  sentiment_explanation text,
  call_summary text,
  task_achieved boolean,
  transcription jsonb NOT NULL DEFAULT '[]',
  -- Credits are whole units (1 credit = 1 US cent), as in the subscription ledger.
  phone_call_credits integer NOT NULL DEFAULT 0,
  web_call_credits integer NOT NULL DEFAULT 0,
  text_message_credits integer NOT NULL DEFAULT 0,
  call_forwarding_credits integer NOT NULL DEFAULT 0,
  -- Tokens per model: { "<model>": { "input": n, "output": n } }; the two totals below are their sums.
  token_usage jsonb NOT NULL DEFAULT '{}',
  input_tokens bigint NOT NULL DEFAULT 0,
  output_tokens bigint NOT NULL DEFAULT 0,
  sms_count integer NOT NULL DEFAULT 0,
  forwarding_seconds integer NOT NULL DEFAULT 0,
  custom_data jsonb NOT NULL DEFAULT '{}',
  dynamic_context jsonb NOT NULL DEFAULT '{}',
  custom_analysis_data jsonb,
  collected_data jsonb,
  transfer_history jsonb,
  -- Which runtime placed the call: `simulator` (built in) or `external` (the runtime API).
  runtime text NOT NULL DEFAULT 'external' CHECK (runtime IN ('simulator', 'external')),
  -- Web calls: a browser joins with a short-lived token; only its hash is kept.
  access_token_hash text UNIQUE,
  access_token_expires_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- The listing's orders and its selective filters; low-cardinality filters ride on the first one.
CREATE INDEX calls_user_start_idx ON calls (user_id, start_timestamp, id);
CREATE INDEX calls_user_agent_start_idx ON calls (user_id, agent_id, start_timestamp, id);
CREATE INDEX calls_user_customer_start_idx ON calls (user_id, customer_id, start_timestamp, id) WHERE customer_id IS NOT NULL;
CREATE INDEX calls_user_workspace_start_idx ON calls (user_id, workspace_id, start_timestamp, id) WHERE workspace_id IS NOT NULL;
-- Calls that are not finished are few but looked for (lists by status, the duration limit).
CREATE INDEX calls_unfinished_idx ON calls (user_id, call_status, start_timestamp, id) WHERE call_status IN ('started', 'pending');

-- Daily rollups, kept exact by a trigger in the same transaction as each change of a call, so that metrics
-- over months read hundreds of rows, not millions. Absent customer, workspace and sentiment are '' so that
-- keys hold no NULLs. Two grains: per agent (with credits and tokens: costs, and every metric filtered at
-- most by agent, customer or workspace), and per every filter value (direction, type, status, sentiment).
CREATE TABLE call_daily_agent_stats (
  user_id text NOT NULL,
  day date NOT NULL,
  agent_id text NOT NULL,
  customer_id text NOT NULL,
  workspace_id text NOT NULL,
  calls bigint NOT NULL,
  ended_calls bigint NOT NULL,
  duration_ms bigint NOT NULL,
  phone_call_credits bigint NOT NULL,
  web_call_credits bigint NOT NULL,
  text_message_credits bigint NOT NULL,
  call_forwarding_credits bigint NOT NULL,
  input_tokens bigint NOT NULL,
  output_tokens bigint NOT NULL,
  PRIMARY KEY (user_id, day, agent_id, customer_id, workspace_id)
);

CREATE TABLE call_daily_stats (
  user_id text NOT NULL,
  day date NOT NULL,
  agent_id text NOT NULL,
  customer_id text NOT NULL,
  workspace_id text NOT NULL,
  direction text NOT NULL,
  call_type text NOT NULL,
  call_status text NOT NULL,
  sentiment text NOT NULL,
  calls bigint NOT NULL,
  ended_calls bigint NOT NULL,
  duration_ms bigint NOT NULL,
  PRIMARY KEY (user_id, day, agent_id, customer_id, workspace_id, direction, call_type, call_status, sentiment)
);

CREATE FUNCTION call_daily_stats_add(r calls, sign integer) RETURNS void LANGUAGE sql AS $$
  INSERT INTO call_daily_agent_stats AS s VALUES (
    r.user_id, (r.start_timestamp AT TIME ZONE 'UTC')::date, r.agent_id, coalesce(r.customer_id, ''), coalesce(r.workspace_id, ''),
    sign, CASE WHEN r.duration_ms IS NULL THEN 0 ELSE sign END, sign * coalesce(r.duration_ms, 0),
    sign * r.phone_call_credits, sign * r.web_call_credits, sign * r.text_message_credits,
    sign * r.call_forwarding_credits, sign * r.input_tokens, sign * r.output_tokens)
  ON CONFLICT (user_id, day, agent_id, customer_id, workspace_id) DO UPDATE SET
    calls = s.calls + excluded.calls,
    ended_calls = s.ended_calls + excluded.ended_calls,
    duration_ms = s.duration_ms + excluded.duration_ms,
    phone_call_credits = s.phone_call_credits + excluded.phone_call_credits,
    web_call_credits = s.web_call_credits + excluded.web_call_credits,
    text_message_credits = s.text_message_credits + excluded.text_message_credits,
    call_forwarding_credits = s.call_forwarding_credits + excluded.call_forwarding_credits,
    input_tokens = s.input_tokens + excluded.input_tokens,
    output_tokens = s.output_tokens + excluded.output_tokens;
  INSERT INTO call_daily_stats AS s VALUES (
    r.user_id, (r.start_timestamp AT TIME ZONE 'UTC')::date, r.agent_id, coalesce(r.customer_id, ''),
    coalesce(r.workspace_id, ''), r.direction, r.call_type, r.call_status, coalesce(r.sentiment, ''),
    sign, CASE WHEN r.duration_ms IS NULL THEN 0 ELSE sign END, sign * coalesce(r.duration_ms, 0))
  ON CONFLICT (user_id, day, agent_id, customer_id, workspace_id, direction, call_type, call_status, sentiment) DO UPDATE SET
    calls = s.calls + excluded.calls,
    ended_calls = s.ended_calls + excluded.ended_calls,
    duration_ms = s.duration_ms + excluded.duration_ms
$$;

CREATE FUNCTION call_daily_stats_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM call_daily_stats_add(NEW, 1);
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM call_daily_stats_add(OLD, -1);
  ELSIF (OLD.start_timestamp, OLD.agent_id, OLD.customer_id, OLD.workspace_id, OLD.direction, OLD.call_type,
         OLD.call_status, OLD.sentiment, OLD.duration_ms, OLD.phone_call_credits, OLD.web_call_credits,
         OLD.text_message_credits, OLD.call_forwarding_credits, OLD.input_tokens, OLD.output_tokens)
     IS DISTINCT FROM
        (NEW.start_timestamp, NEW.agent_id, NEW.customer_id, NEW.workspace_id, NEW.direction, NEW.call_type,
         NEW.call_status, NEW.sentiment, NEW.duration_ms, NEW.phone_call_credits, NEW.web_call_credits,
         NEW.text_message_credits, NEW.call_forwarding_credits, NEW.input_tokens, NEW.output_tokens) THEN
    -- The usual changes move the status (started, pending, success or failed): touching the two rows in
    -- status order keeps concurrent ones from waiting on each other in a cycle.
    IF OLD.call_status <= NEW.call_status THEN
      PERFORM call_daily_stats_add(OLD, -1);
      PERFORM call_daily_stats_add(NEW, 1);
    ELSE
      PERFORM call_daily_stats_add(NEW, 1);
      PERFORM call_daily_stats_add(OLD, -1);
    END IF;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER calls_daily_stats AFTER INSERT OR UPDATE OR DELETE ON calls
  FOR EACH ROW EXECUTE FUNCTION call_daily_stats_trigger();

-- Idempotency-Key of call creation: a retried request answers the first call. Kept 24 hours.
CREATE TABLE idempotency_keys (
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  key text NOT NULL,
  request_hash text NOT NULL,
  call_id text NOT NULL,
  response jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, key)
);
CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys (created_at);
