-- migrate: no-transaction
-- Every answered caller turn of a call is timed (issue 27): the turns and their summary per stage (p50, p90, min, max,
-- count) are stored with the call when it ends (db/shapes.ts, CallLatency; docs/calls.md, "Latency"). Null for calls
-- without timed turns: those ended before, by the simulator or an outside runtime, or that never reached an answer.
ALTER TABLE calls ADD COLUMN IF NOT EXISTS latency jsonb;

-- migrate: step
-- The metrics' latency reads the timed calls of a range alone: an account without them costs one empty index probe,
-- not a read of every call. Built concurrently: calls stay writable meanwhile (docs/migrations.md).
CREATE INDEX CONCURRENTLY IF NOT EXISTS calls_user_latency_start_idx ON calls (user_id, start_timestamp) WHERE latency IS NOT NULL;
