-- Each call's list view (GET /v1/call/list) as JSON text, kept by a trigger whenever the row changes. A page
-- of the list then sends 100 stored texts: building them per request cost PostgreSQL ~20 µs a call, most of
-- the listing's time (docs/calls.md). Keys and their order are the CallListItem schema's.
ALTER TABLE calls ADD COLUMN list_json text;

-- A value as JSON text, null included (to_json gives SQL NULL for it).
CREATE FUNCTION json_value_text(value anyelement) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT coalesce(to_json(value)::text, 'null') $$;

-- Written out rather than json_build_object, whose `"key" : value, ` spacing is 8% of a page's bytes.
CREATE FUNCTION call_list_json_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.list_json := '{"_id":' || json_value_text(NEW.id)
    || ',"call_type":' || json_value_text(NEW.call_type)
    || ',"agent_id":' || json_value_text(NEW.agent_id)
    || ',"agent_name":' || json_value_text(NEW.agent_name)
    || ',"call_status":' || json_value_text(NEW.call_status)
    || ',"call_from":' || json_value_text(NEW.call_from)
    || ',"call_to":' || json_value_text(NEW.call_to)
    || ',"direction":' || json_value_text(NEW.direction)
    || ',"start_timestamp":' || json_value_text((extract(epoch FROM NEW.start_timestamp) * 1000)::bigint)
    || ',"end_timestamp":' || json_value_text((extract(epoch FROM NEW.end_timestamp) * 1000)::bigint)
    || ',"recording_url":' || json_value_text(NEW.recording_url)
    || ',"disconnection_reason":' || json_value_text(NEW.disconnection_reason)
    || ',"sentiment":' || CASE WHEN NEW.sentiment IS NULL THEN 'null'
      ELSE '{"sentiment":' || json_value_text(NEW.sentiment) || ',"explanation":' || json_value_text(coalesce(NEW.sentiment_explanation, '')) || '}' END
    || ',"call_summary":' || json_value_text(NEW.call_summary)
    || ',"task_achieved":' || json_value_text(NEW.task_achieved)
    || '}';
  RETURN NEW;
END
$$;

CREATE TRIGGER calls_list_json BEFORE INSERT OR UPDATE ON calls
  FOR EACH ROW EXECUTE FUNCTION call_list_json_trigger();
-- Also under session_replication_role = replica (bulk loads that switch the rollup trigger off).
ALTER TABLE calls ENABLE ALWAYS TRIGGER calls_list_json;

-- Fills existing calls (about 3 minutes a million calls); the rollup trigger ignores the change.
UPDATE calls SET list_json = '';
ALTER TABLE calls ALTER COLUMN list_json SET NOT NULL;
