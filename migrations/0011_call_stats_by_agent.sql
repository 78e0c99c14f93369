-- migrate: no-transaction
-- Metrics filtered by agent (sentiment-stats always is) read the finer rollup from this index alone: one
-- agent's days lie together, where the primary key spreads them over every agent's rows of each day (-40% of
-- PostgreSQL's time for such a metric over 30 days, docs/calls.md). Its sums make rollup updates non-HOT: a
-- few microseconds more per call event, for reads that dashboards repeat all day. Built concurrently: the
-- rollups stay writable meanwhile (docs/migrations.md).
CREATE INDEX CONCURRENTLY IF NOT EXISTS call_daily_stats_agent_idx ON call_daily_stats (user_id, agent_id, day)
  INCLUDE (customer_id, workspace_id, direction, call_type, call_status, sentiment, calls, ended_calls, duration_ms);
