-- Numbers a tenant imports from its own Telnyx account (docs/voice.md, "Phone calls on Telnyx"). Such a number keeps
-- the account's API key in carrier_auth_token (sealed like a Twilio auth token), our own id for that Telnyx account in
-- carrier_account_id (its webhooks come to /telephony/telnyx/webhook/accounts/<that id>), the account's webhook
-- signing public key, and the Call Control application created there for its calls. The installation's own Telnyx
-- numbers keep all of these null.
ALTER TABLE phone_numbers ADD COLUMN carrier_public_key text;
ALTER TABLE phone_numbers ADD COLUMN carrier_connection_id text;
ALTER TABLE phone_numbers ADD CONSTRAINT phone_numbers_telnyx_tenant_check CHECK (
  carrier_public_key IS NULL OR (carrier = 'telnyx' AND carrier_account_id IS NOT NULL AND carrier_auth_token IS NOT NULL AND carrier_connection_id IS NOT NULL)
);
-- A webhook names the account: its key is found by that id.
CREATE INDEX phone_numbers_telnyx_account_idx ON phone_numbers (carrier_account_id) WHERE carrier_public_key IS NOT NULL;
