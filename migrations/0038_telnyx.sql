-- Telnyx as a second carrier (docs/voice.md, "Phone calls"; docs/phone-numbers.md). Each number and each call
-- says which carrier holds it, so one installation holds numbers of both.
ALTER TABLE phone_numbers DROP CONSTRAINT phone_numbers_carrier_check;
ALTER TABLE phone_numbers ADD CONSTRAINT phone_numbers_carrier_check CHECK (carrier IN ('sandbox', 'twilio', 'telnyx', 'sip'));
ALTER TABLE calls DROP CONSTRAINT calls_carrier_check;
ALTER TABLE calls ADD CONSTRAINT calls_carrier_check CHECK (carrier IN ('twilio', 'telnyx'));
-- When the person a Telnyx call was forwarded to answered (the transfer's leg): the forwarding minutes run from
-- here. Telnyx reports the answer and the hang-up of that leg separately; Twilio's <Dial> reports its duration.
ALTER TABLE calls ADD COLUMN transfer_answered_at timestamptz;
