-- Phone calls through Twilio (docs/voice.md, "Phone calls").

-- The carrier that carries the call (`twilio`); NULL: no carrier (web calls, and phone calls of numbers
-- without one, which the voice runtime simulates).
ALTER TABLE calls ADD COLUMN carrier text CHECK (carrier IN ('twilio'));
-- The carrier's id of the call (a Twilio CallSid): one call per carrier call, whatever retries come.
ALTER TABLE calls ADD COLUMN carrier_call_id text;
CREATE UNIQUE INDEX calls_carrier_call_id ON calls (carrier, carrier_call_id) WHERE carrier_call_id IS NOT NULL;
-- The conversation while the call is forwarded to a phone number (call_forwarding, agent_transfer to a
-- number): what the voice session held, so that whoever takes the call back or ends it carries on from there.
ALTER TABLE calls ADD COLUMN forwarding jsonb;
