-- Each call's list view (GET /v1/call/list) as JSON text, kept by a trigger whenever the row changes. A page
-- of the list then sends 100 stored texts: building them per request cost PostgreSQL ~20 µs a call, most of
-- the listing's time (docs/calls.md). Keys and their order are the CallListItem schema's.
ALTER TABLE calls ADD COLUMN list_json text;

CREATE FUNCTION call_list_json_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.list_json := json_build_object(
    '_id', NEW.id, 'call_type', NEW.call_type, 'agent_id', NEW.agent_id, 'agent_name', NEW.agent_name,
    'call_status', NEW.call_status, 'call_from', NEW.call_from, 'call_to', NEW.call_to, 'direction', NEW.direction,
    'start_timestamp', (extract(epoch FROM NEW.start_timestamp) * 1000)::bigint,
    'end_timestamp', (extract(epoch FROM NEW.end_timestamp) * 1000)::bigint,
    'recording_url', NEW.recording_url, 'disconnection_reason', NEW.disconnection_reason,
    'sentiment', CASE WHEN NEW.sentiment IS NULL THEN NULL
      ELSE json_build_object('sentiment', NEW.sentiment, 'explanation', coalesce(NEW.sentiment_explanation, '')) END,
    'call_summary', NEW.call_summary, 'task_achieved', NEW.task_achieved)::text;
  RETURN NEW;
END
$$;

CREATE TRIGGER calls_list_json BEFORE INSERT OR UPDATE ON calls
  FOR EACH ROW EXECUTE FUNCTION call_list_json_trigger();
-- Also under session_replication_role = replica (bulk loads that switch the rollup trigger off).
ALTER TABLE calls ENABLE ALWAYS TRIGGER calls_list_json;

-- Fills existing calls (about 2 minutes a million); the rollup trigger ignores the change.
UPDATE calls SET list_json = '';
ALTER TABLE calls ALTER COLUMN list_json SET NOT NULL;
