-- Who detects the end of the caller's turn (docs/voice.md, "Turn detection"): {"type": "switchboard"}, our own
-- (the default, on both engines), or the realtime provider's server_vad / semantic_vad with its settings, which
-- only the realtime engine can use: the API refuses them otherwise, and this CHECK catches two PATCHes that race.
ALTER TABLE llm_configs ADD COLUMN turn_detection jsonb NOT NULL DEFAULT '{"type": "switchboard"}'
  CHECK (turn_detection->>'type' IN ('switchboard', 'server_vad', 'semantic_vad')),
  ADD CONSTRAINT llm_configs_provider_turns_realtime CHECK (turn_detection->>'type' = 'switchboard' OR engine = 'realtime');
