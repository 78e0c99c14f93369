-- Post-call deliveries carry e-mail, SMS and WhatsApp messages beside HTTP requests (issue 28): `kind` is the type of
-- the action behind a delivery, which tells its channel. Added NOT VALID and validated apart: no lock that blocks
-- writes while the existing rows (all of them agent_webhook or api_call) are checked.
ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS webhook_deliveries_kind_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_kind_check
  CHECK (kind IN ('agent_webhook', 'api_call', 'send_email', 'send_sms', 'send_chat')) NOT VALID;
ALTER TABLE webhook_deliveries VALIDATE CONSTRAINT webhook_deliveries_kind_check;
