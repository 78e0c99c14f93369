-- What the end of a call and its analysis leave on the record.
ALTER TABLE calls
  -- As the runtime reported it: `completed` (a conversation took place) or `failed` (never connected).
  ADD COLUMN outcome text CHECK (outcome IN ('completed', 'failed')),
  -- `pending` from the end of the call until the analysis job finishes; `failed` when the analyser gave up.
  ADD COLUMN analysis_status text CHECK (analysis_status IN ('pending', 'completed', 'failed')),
  ADD COLUMN analysis_error text;
