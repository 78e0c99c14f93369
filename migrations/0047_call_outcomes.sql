-- migrate: no-transaction
-- migrate: step
-- The console's outcome analytics (calls/queries.ts, outcomeCounts; docs/console.md, "Analytics") count a range's
-- calls by status, task, duration and end reason from this index alone: 300 -> 44 ms for 100,000 calls (npm run
-- bench:analytics). Every included column is bounded (disconnection_reason: 100 characters from the runtime API).
-- transfer_history is not: a jsonb of up to 100 items could exceed an index row's size and fail the call's write,
-- so the few calls with transfers get their own partial index instead (transferCounts). Both make updates of these
-- columns non-HOT, which the call's other indexes (call_status in calls_unfinished_idx) already do. Built
-- concurrently: calls stay writable meanwhile (docs/migrations.md).
CREATE INDEX CONCURRENTLY IF NOT EXISTS calls_user_outcomes_idx ON calls (user_id, start_timestamp)
  INCLUDE (agent_id, workspace_id, call_status, task_achieved, duration_ms, disconnection_reason);
-- migrate: step
CREATE INDEX CONCURRENTLY IF NOT EXISTS calls_user_transferred_idx ON calls (user_id, start_timestamp)
  WHERE jsonb_array_length(transfer_history) > 0;
