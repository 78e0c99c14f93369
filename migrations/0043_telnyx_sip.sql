-- SIP trunk numbers carried by Telnyx (issue 31, docs/sip.md "Telnyx"). `sip_carrier` says which carrier holds the
-- resources of a connected SIP number: for Twilio, sip_domain_sid and sip_credential_list_sid are its SIP Domain and
-- credential list (0039); for Telnyx, its Call Control application (which takes the PBX's calls to `sip_subdomain`)
-- and the credential connection the PBX authenticates with. Numbers connected before are Twilio's.
ALTER TABLE phone_numbers
  ADD COLUMN sip_carrier text CHECK (sip_carrier IN ('twilio', 'telnyx')),
  ADD COLUMN sip_subdomain text;
UPDATE phone_numbers SET sip_carrier = 'twilio' WHERE sip_domain_sid IS NOT NULL;
