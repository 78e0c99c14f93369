-- Agents and what hangs off them: language-model configurations, actions, tools, the template catalogue
-- and the account's connected integrations. Settings objects are jsonb: their shape depends on a type
-- and is validated by the application (src/modules/agents/settings.ts).

CREATE TABLE llm_configs (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  model text NOT NULL,
  begin_message text,
  general_prompt text NOT NULL DEFAULT '',
  temperature real NOT NULL DEFAULT 0.7,
  max_tokens integer,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX llm_configs_user_id_idx ON llm_configs (user_id, id);

CREATE TABLE agents (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  customer_id text REFERENCES customers (id),
  workspace_id text REFERENCES workspaces (id),
  agent_name text NOT NULL,
  -- RESTRICT: a configuration still behind an agent cannot go (the API answers 409 first).
  llm_id text NOT NULL REFERENCES llm_configs (id) ON DELETE RESTRICT,
  voice_id text NOT NULL REFERENCES voices (id),
  interruption_sensitivity real NOT NULL,
  call_settings jsonb NOT NULL,
  data_retrieval jsonb NOT NULL DEFAULT '[]',
  webhook_url text,
  is_data_collection_active boolean NOT NULL DEFAULT false,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
  folder text,
  is_customer_memory_active boolean NOT NULL DEFAULT false,
  widget_settings jsonb NOT NULL,
  callback_settings jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agents_user_id_idx ON agents (user_id, id);
CREATE INDEX agents_llm_id_idx ON agents (llm_id);

CREATE TABLE agent_actions (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  action_type text NOT NULL CHECK (action_type IN ('send_email', 'send_sms', 'send_chat', 'api_call')),
  settings jsonb NOT NULL,
  is_active boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_actions_agent_id_idx ON agent_actions (agent_id, id);

CREATE TABLE agent_tools (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  tool_type text NOT NULL CHECK (tool_type IN ('api_rag', 'appointment_booking', 'call_forwarding', 'end_call',
    'calendar_one', 'calendar_two', 'booking_one', 'booking_two', 'crm', 'agent_transfer', 'mcp')),
  settings jsonb NOT NULL,
  is_active boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_tools_agent_id_idx ON agent_tools (agent_id, id);
-- An agent_transfer tool names its target in settings; deleting the target must find those tools.
CREATE INDEX agent_tools_transfer_target_idx ON agent_tools ((settings ->> 'agent_id')) WHERE tool_type = 'agent_transfer';

-- External accounts connected to a Switchboard account. Credentials are write-only through the API.
CREATE TABLE integrations (
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  provider text NOT NULL CHECK (provider IN ('calendar_one', 'calendar_two', 'booking_one', 'booking_two', 'crm')),
  account_label text NOT NULL DEFAULT '',
  credentials jsonb NOT NULL,
  connected_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, provider)
);

-- The read-only template catalogue; cloning copies `agent` into a new agent and `llm` into a new configuration.
CREATE TABLE agent_templates (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  position integer NOT NULL,
  icon_url text NOT NULL,
  description text NOT NULL,
  agent jsonb NOT NULL,
  llm jsonb NOT NULL
);

INSERT INTO agent_templates (id, position, icon_url, description, agent, llm) VALUES
('65a0f1000000000000000001', 1,
 'data:image/svg+xml,%3Csvg xmlns=%22http://www.w3.org/2000/svg%22 viewBox=%220 0 64 64%22%3E%3Ctext y=%2252%22 font-size=%2252%22%3E%F0%9F%93%9E%3C/text%3E%3C/svg%3E',
 'Answers the main line, greets callers, answers common questions from the knowledge base and forwards to a person when asked.',
 '{"agent_name": "Receptionist", "call_settings": {"language": "en-US", "sentiment_analysis": true, "call_summary": true, "max_call_duration_minutes": 10}, "data_retrieval": [{"name": "caller_name", "type": "string", "description": "the caller''s full name", "required": false}, {"name": "reason_for_call", "type": "string", "description": "why the caller is calling, in a few words", "required": true}]}',
 '{"model": "gpt-4o-mini", "begin_message": "Thank you for calling. How can I help you today?", "general_prompt": "You are the friendly receptionist of the business. Greet the caller, find out why they call, answer short questions from the knowledge base and offer to forward the call when they want to speak to a person. Keep answers brief.", "temperature": 0.5}'),
('65a0f1000000000000000002', 2,
 'data:image/svg+xml,%3Csvg xmlns=%22http://www.w3.org/2000/svg%22 viewBox=%220 0 64 64%22%3E%3Ctext y=%2252%22 font-size=%2252%22%3E%F0%9F%93%85%3C/text%3E%3C/svg%3E',
 'Books, moves and cancels appointments: checks availability, confirms date and time and repeats the booking back.',
 '{"agent_name": "Appointment booking", "call_settings": {"language": "en-US", "sentiment_analysis": true, "call_summary": true, "max_call_duration_minutes": 8}, "data_retrieval": [{"name": "appointment_date", "type": "date", "description": "the agreed appointment date", "required": true}, {"name": "appointment_type", "type": "enum", "description": "what the appointment is for", "enum_values": ["consultation", "follow_up", "other"], "required": false}]}',
 '{"model": "gpt-4o-mini", "begin_message": "Hello! I can help you book, move or cancel an appointment. What would you like to do?", "general_prompt": "You schedule appointments. Ask for the caller''s name, the kind of appointment and a preferred day and time, check availability with the booking tool, confirm the slot and repeat it back before ending the call.", "temperature": 0.3}'),
('65a0f1000000000000000003', 3,
 'data:image/svg+xml,%3Csvg xmlns=%22http://www.w3.org/2000/svg%22 viewBox=%220 0 64 64%22%3E%3Ctext y=%2252%22 font-size=%2252%22%3E%F0%9F%8E%AF%3C/text%3E%3C/svg%3E',
 'Qualifies inbound or outbound leads by budget, need, timeline and decision maker, and records the answers.',
 '{"agent_name": "Lead qualification", "call_settings": {"language": "en-US", "sentiment_analysis": true, "call_summary": true, "max_call_duration_minutes": 10}, "data_retrieval": [{"name": "budget", "type": "number", "description": "the budget the lead names, in their currency", "required": false}, {"name": "timeline", "type": "string", "description": "when they want to start", "required": false}, {"name": "is_decision_maker", "type": "boolean", "description": "whether the person decides the purchase", "required": true}]}',
 '{"model": "gpt-4o", "begin_message": "Hi, thanks for your interest! Do you have a few minutes to talk about what you are looking for?", "general_prompt": "You qualify sales leads. Find out the need, budget, timeline and whether the person decides the purchase. Be curious and polite, never pushy. Offer a follow-up with a sales representative to qualified leads.", "temperature": 0.6}'),
('65a0f1000000000000000004', 4,
 'data:image/svg+xml,%3Csvg xmlns=%22http://www.w3.org/2000/svg%22 viewBox=%220 0 64 64%22%3E%3Ctext y=%2252%22 font-size=%2252%22%3E%F0%9F%9B%9F%3C/text%3E%3C/svg%3E',
 'Handles first-line customer support: looks up answers in the knowledge base, collects the issue and escalates what it cannot solve.',
 '{"agent_name": "Customer support", "call_settings": {"language": "en-US", "sentiment_analysis": true, "call_summary": true, "max_call_duration_minutes": 15}, "data_retrieval": [{"name": "issue_category", "type": "enum", "description": "the kind of problem", "enum_values": ["billing", "technical", "account", "other"], "required": true}, {"name": "resolved", "type": "boolean", "description": "whether the issue was solved during the call", "required": true}]}',
 '{"model": "gpt-4o", "begin_message": "Hello, you are speaking with customer support. What can I help you with?", "general_prompt": "You are a patient support agent. Understand the problem, search the knowledge base for the answer, walk the caller through it step by step, and if you cannot solve it, collect the details and promise a follow-up.", "temperature": 0.4}'),
('65a0f1000000000000000005', 5,
 'data:image/svg+xml,%3Csvg xmlns=%22http://www.w3.org/2000/svg%22 viewBox=%220 0 64 64%22%3E%3Ctext y=%2252%22 font-size=%2252%22%3E%F0%9F%93%8B%3C/text%3E%3C/svg%3E',
 'Runs a short satisfaction survey: asks a fixed set of questions and records a score and comments.',
 '{"agent_name": "Survey", "call_settings": {"language": "en-US", "sentiment_analysis": true, "call_summary": true, "max_call_duration_minutes": 5}, "data_retrieval": [{"name": "satisfaction_score", "type": "number", "description": "score from 1 (poor) to 10 (excellent)", "required": true}, {"name": "would_recommend", "type": "boolean", "description": "whether they would recommend us", "required": false}, {"name": "comments", "type": "string", "description": "anything else they said", "required": false}]}',
 '{"model": "gpt-4o-mini", "begin_message": "Hi, this is a quick two-minute survey about your recent experience with us. Is now a good time?", "general_prompt": "You run a short customer satisfaction survey. Ask for a score from 1 to 10, whether they would recommend us, and for any comments. Thank them and end the call. Do not sell anything.", "temperature": 0.3}'),
('65a0f1000000000000000006', 6,
 'data:image/svg+xml,%3Csvg xmlns=%22http://www.w3.org/2000/svg%22 viewBox=%220 0 64 64%22%3E%3Ctext y=%2252%22 font-size=%2252%22%3E%E2%8F%B0%3C/text%3E%3C/svg%3E',
 'Calls customers before an appointment or a due date, confirms they will attend and offers to reschedule.',
 '{"agent_name": "Outbound reminder", "call_settings": {"language": "en-US", "sentiment_analysis": false, "call_summary": true, "max_call_duration_minutes": 3}, "data_retrieval": [{"name": "confirmed", "type": "boolean", "description": "whether the customer confirmed", "required": true}, {"name": "reschedule_requested", "type": "boolean", "description": "whether they asked to move the appointment", "required": false}]}',
 '{"model": "gpt-4o-mini", "begin_message": "Hello {{customer_name}}, this is a reminder about your appointment on {{appointment_date}}. Will you be able to make it?", "general_prompt": "You call to remind the customer of an appointment. Confirm whether they will attend. If not, offer to reschedule. Keep the call under two minutes.", "temperature": 0.3}');
