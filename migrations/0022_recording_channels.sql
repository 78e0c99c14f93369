-- Calls record two tracks (issue 27): the samples of a new recording are interleaved stereo PCM16 at 16 kHz, the
-- caller on the left and the agent on the right. Recordings stored before stay mono (both sides mixed): the count
-- of channels is kept with each recording, so that reads know which layout its samples have (docs/voice.md).
ALTER TABLE call_recordings ADD COLUMN channels smallint NOT NULL DEFAULT 1 CHECK (channels IN (1, 2));
