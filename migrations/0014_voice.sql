-- The built-in voice engine (docs/voice.md).

-- The engine an LLM configuration's calls run on; NULL: the installation's VOICE_ENGINE.
ALTER TABLE llm_configs ADD COLUMN engine text CHECK (engine IN ('realtime', 'cascade', 'simulator'));

-- `voice`: held by the built-in voice engine.
ALTER TABLE calls DROP CONSTRAINT calls_runtime_check;
ALTER TABLE calls ADD CONSTRAINT calls_runtime_check CHECK (runtime IN ('voice', 'simulator', 'external'));
-- When the browser's stream opened with the call's access token (which that spends); NULL: nobody joined.
ALTER TABLE calls ADD COLUMN joined_at timestamptz;
-- Seconds of the caller's speech recognised and of the agent's synthesised (the speech providers' usage).
ALTER TABLE calls ADD COLUMN speech_recognised_seconds double precision NOT NULL DEFAULT 0 CHECK (speech_recognised_seconds >= 0);
ALTER TABLE calls ADD COLUMN speech_synthesised_seconds double precision NOT NULL DEFAULT 0 CHECK (speech_synthesised_seconds >= 0);

-- A call's recording: mono WAV, both sides mixed (recording_enabled). Bounded by the longest call
-- (15 minutes of 16 kHz PCM16 is under 30 MB).
CREATE TABLE call_recordings (
  call_id text PRIMARY KEY REFERENCES calls (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  duration_ms integer NOT NULL CHECK (duration_ms >= 0),
  data bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
