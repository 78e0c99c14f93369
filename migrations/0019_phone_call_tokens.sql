-- Phone calls through a carrier (issue 26).

-- A phone call's media-stream token has its own column, apart from a web call's access token: a token opens
-- only the kind of call it was made for (the web-call routes read access_token_hash, the Twilio stream
-- stream_token_hash), and the checks below keep each column to its call type.
ALTER TABLE calls ADD COLUMN stream_token_hash text UNIQUE;
ALTER TABLE calls ADD COLUMN stream_token_expires_at timestamptz;
UPDATE calls SET stream_token_hash = access_token_hash, stream_token_expires_at = access_token_expires_at,
  access_token_hash = NULL, access_token_expires_at = NULL
  WHERE call_type = 'phone' AND access_token_hash IS NOT NULL;
ALTER TABLE calls ADD CONSTRAINT calls_access_token_web CHECK (access_token_hash IS NULL OR call_type = 'web');
ALTER TABLE calls ADD CONSTRAINT calls_stream_token_phone CHECK (stream_token_hash IS NULL OR call_type = 'phone');

-- When the person answered a call the carrier placed: its duration and minutes run from here, not from the
-- start of the ringing. NULL: no answer known (the call's start counts, as for inbound and web calls).
ALTER TABLE calls ADD COLUMN answered_at timestamptz;

-- How long an outbound call rings before it counts as not answered (make-phone-call's ring_timeout_seconds,
-- Twilio's Timeout); NULL: the default, 30 seconds.
ALTER TABLE calls ADD COLUMN ring_timeout_seconds integer CHECK (ring_timeout_seconds BETWEEN 1 AND 600);
