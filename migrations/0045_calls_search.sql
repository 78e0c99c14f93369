-- migrate: no-transaction
-- The console's call search (src/modules/calls/queries.ts, searchCondition): by words of the transcript (full
-- text, 'simple': no language's stemming, the words as spoken) and by digits of the numbers (trigrams, so that
-- any part of a number matches). The queries write these expressions exactly, or the indexes are not used.
-- A call's transcript as one text: the spoken lines (tool and step lines carry their names, not speech).
CREATE OR REPLACE FUNCTION call_transcript_text(transcription jsonb) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (SELECT string_agg(item ->> 'content', ' ') FROM jsonb_array_elements(coalesce(transcription, '[]')) AS item
  WHERE item ->> 'speaker' IN ('agent', 'user'));

-- migrate: step
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- migrate: step
-- Built concurrently: calls stay writable meanwhile (docs/migrations.md).
CREATE INDEX CONCURRENTLY IF NOT EXISTS calls_transcript_search_idx ON calls USING gin (to_tsvector('simple', call_transcript_text(transcription)));

-- migrate: step
CREATE INDEX CONCURRENTLY IF NOT EXISTS calls_numbers_search_idx ON calls USING gin ((coalesce(call_from, '') || ' ' || coalesce(call_to, '')) gin_trgm_ops);
