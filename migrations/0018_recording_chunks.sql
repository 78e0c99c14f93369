-- A call's recording is stored while the call runs, a few seconds at a time, instead of whole at its end, and
-- read back a window at a time (docs/voice.md, "Recordings"). The samples (mono PCM16, 16 kHz) are kept without
-- a WAV header: the header is made on each read from `pcm_bytes`, so it is right for the recording so far.

CREATE TABLE call_recording_chunks (
  call_id text NOT NULL REFERENCES call_recordings (call_id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- Where the chunk's first byte lies in the recording's samples; chunks follow each other without gaps.
  offset_bytes bigint NOT NULL CHECK (offset_bytes >= 0),
  data bytea NOT NULL,
  PRIMARY KEY (call_id, offset_bytes)
);

-- Bytes of samples stored so far (the sum of the chunks' lengths), kept with each append.
ALTER TABLE call_recordings ADD COLUMN pcm_bytes bigint NOT NULL DEFAULT 0 CHECK (pcm_bytes >= 0);

-- Recordings stored whole until now were WAV files written by the recorder: a 44-byte header, then the samples.
INSERT INTO call_recording_chunks (call_id, user_id, offset_bytes, data)
  SELECT call_id, user_id, 0, substring(data FROM 45) FROM call_recordings WHERE octet_length(data) > 44;
UPDATE call_recordings SET pcm_bytes = greatest(octet_length(data) - 44, 0);
ALTER TABLE call_recordings DROP COLUMN data;
