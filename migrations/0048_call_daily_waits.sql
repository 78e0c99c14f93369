-- migrate: no-transaction
-- migrate: step
-- What callers waited, counted per UTC day, agent, workspace and wait in whole ms: the Analytics page's per-turn
-- percentiles and its calls by median wait (calls/queries.ts, turnWaits and medianWaitBuckets) read a range's
-- distinct waits (a few thousand rows) instead of every turn of every call of the range (npm run bench:analytics).
-- kind 'turn': an answered turn's e2e_ms (n turns, `interrupted` of them cut off by the caller); kind 'median': a
-- call's median wait, latency.e2e.p50 (n calls). Kept by a trigger as call_daily_stats is (0005_calls.sql).
-- The calls already stored are counted in batches by the next step while the trigger counts changes: the watermark
-- call_daily_waits_backfill says which calls the count has passed, and the trigger leaves the others to it.
-- Created together or not at all, once: a rerun after the last step must not bring the watermark back.
DO $$
BEGIN
  IF to_regclass('call_daily_waits') IS NOT NULL THEN RETURN; END IF;
  CREATE TABLE call_daily_waits (
    user_id text NOT NULL,
    day date NOT NULL,
    agent_id text NOT NULL,
    workspace_id text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('turn', 'median')),
    wait_ms integer NOT NULL,
    n bigint NOT NULL,
    interrupted bigint NOT NULL,
    PRIMARY KEY (user_id, day, agent_id, workspace_id, kind, wait_ms)
  );
  CREATE TABLE call_daily_waits_backfill (done_until text NOT NULL, finished boolean NOT NULL);
  INSERT INTO call_daily_waits_backfill VALUES ('', false);

  -- A call's waits as rollup keys; none without latency, nor for no call (NULL: STRICT). STRICT also keeps it from
  -- being inlined into a query over calls, which PostgreSQL 18 cannot plan with the whole row passed in.
  CREATE FUNCTION call_waits(r calls) RETURNS TABLE (user_id text, day date, agent_id text, workspace_id text, kind text, wait_ms integer, interrupted boolean)
  LANGUAGE sql STABLE STRICT AS $f$
    SELECT r.user_id, (r.start_timestamp AT TIME ZONE 'UTC')::date, r.agent_id, coalesce(r.workspace_id, ''), w.kind, w.wait_ms, w.interrupted
    FROM (
      SELECT 'turn' AS kind, round((t ->> 'e2e_ms')::numeric)::integer AS wait_ms, coalesce(t ->> 'interrupted' = 'true', false) AS interrupted
      FROM jsonb_array_elements(CASE WHEN jsonb_typeof(r.latency -> 'turns') = 'array' THEN r.latency -> 'turns' ELSE '[]' END) AS t
      UNION ALL
      SELECT 'median', round((r.latency -> 'e2e' ->> 'p50')::numeric)::integer, false
    ) AS w
    WHERE r.latency IS NOT NULL AND w.wait_ms IS NOT NULL
  $f$;

  -- A call's change: its old waits out, its new ones in, in one statement and in key order, so that two calls'
  -- changes of the same rows take their locks in the same order.
  CREATE FUNCTION call_daily_waits_change(before_row calls, after_row calls) RETURNS void LANGUAGE sql AS $f$
    INSERT INTO call_daily_waits AS s (user_id, day, agent_id, workspace_id, kind, wait_ms, n, interrupted)
    SELECT user_id, day, agent_id, workspace_id, kind, wait_ms, sum(sign), sum(CASE WHEN interrupted THEN sign ELSE 0 END)
    FROM (SELECT -1 AS sign, * FROM call_waits(before_row) UNION ALL SELECT 1, * FROM call_waits(after_row)) AS w
    GROUP BY user_id, day, agent_id, workspace_id, kind, wait_ms
    HAVING sum(sign) <> 0 OR sum(CASE WHEN interrupted THEN sign ELSE 0 END) <> 0
    ORDER BY user_id, day, agent_id, workspace_id, kind, wait_ms
    ON CONFLICT (user_id, day, agent_id, workspace_id, kind, wait_ms) DO UPDATE SET
      n = s.n + excluded.n, interrupted = s.interrupted + excluded.interrupted
  $f$;

  -- What a change of a call changes: the columns the rollup keys on and the waits themselves.
  CREATE FUNCTION call_daily_waits_count(op text, before_row calls, after_row calls) RETURNS void LANGUAGE plpgsql AS $f$
  BEGIN
    IF op = 'INSERT' THEN
      PERFORM call_daily_waits_change(NULL, after_row);
    ELSIF op = 'DELETE' THEN
      PERFORM call_daily_waits_change(before_row, NULL);
    ELSIF (before_row.start_timestamp, before_row.agent_id, before_row.workspace_id, before_row.latency)
      IS DISTINCT FROM (after_row.start_timestamp, after_row.agent_id, after_row.workspace_id, after_row.latency) THEN
      PERFORM call_daily_waits_change(before_row, after_row);
    END IF;
  END
  $f$;

  -- While the stored calls are counted: a call the count has not passed is left to it (it counts the call as it is
  -- then). FOR SHARE: a batch holds the watermark FOR UPDATE, so a change to one of its calls waits for it and then
  -- finds the call counted as it was before the change.
  CREATE FUNCTION call_daily_waits_trigger() RETURNS trigger LANGUAGE plpgsql AS $f$
  DECLARE mark call_daily_waits_backfill;
  BEGIN
    SELECT * INTO mark FROM call_daily_waits_backfill FOR SHARE;
    IF mark IS NOT NULL AND NOT mark.finished AND coalesce(NEW.id, OLD.id) > mark.done_until THEN RETURN NULL; END IF;
    PERFORM call_daily_waits_count(TG_OP, OLD, NEW);
    RETURN NULL;
  END
  $f$;
  CREATE TRIGGER calls_daily_waits AFTER INSERT OR UPDATE OR DELETE ON calls FOR EACH ROW EXECUTE FUNCTION call_daily_waits_trigger();
END
$$;
-- migrate: step
-- The stored calls, 5,000 at a time in id order (about a second each), each batch committed with the watermark.
-- Calls made meanwhile have later ids: the last batch, which finds none left, ends the count under the same lock.
DO $$
DECLARE
  done text;
  upto text;
BEGIN
  IF to_regclass('call_daily_waits_backfill') IS NULL THEN RETURN; END IF;
  LOOP
    SELECT done_until INTO done FROM call_daily_waits_backfill WHERE NOT finished FOR UPDATE;
    EXIT WHEN NOT FOUND;
    SELECT max(id) INTO upto FROM (SELECT id FROM calls WHERE id > done ORDER BY id LIMIT 5000) AS batch;
    IF upto IS NULL THEN
      UPDATE call_daily_waits_backfill SET finished = true;
    ELSE
      INSERT INTO call_daily_waits AS s (user_id, day, agent_id, workspace_id, kind, wait_ms, n, interrupted)
      SELECT w.user_id, w.day, w.agent_id, w.workspace_id, w.kind, w.wait_ms, count(*), count(*) FILTER (WHERE w.interrupted)
      FROM calls AS c CROSS JOIN LATERAL call_waits(c) AS w
      WHERE c.id > done AND c.id <= upto AND c.latency IS NOT NULL
      GROUP BY 1, 2, 3, 4, 5, 6
      ORDER BY 1, 2, 3, 4, 5, 6
      ON CONFLICT (user_id, day, agent_id, workspace_id, kind, wait_ms) DO UPDATE SET
        n = s.n + excluded.n, interrupted = s.interrupted + excluded.interrupted;
      UPDATE call_daily_waits_backfill SET done_until = upto;
    END IF;
    COMMIT;
  END LOOP;
END
$$;
-- migrate: step
-- Counted: the trigger no longer looks at the watermark (nor locks it on every change of a call).
CREATE OR REPLACE FUNCTION call_daily_waits_trigger() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  PERFORM call_daily_waits_count(TG_OP, OLD, NEW);
  RETURN NULL;
END
$f$;
DROP TABLE IF EXISTS call_daily_waits_backfill;
