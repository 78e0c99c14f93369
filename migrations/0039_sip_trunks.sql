-- SIP trunk numbers carried by Twilio (issue 31, docs/sip.md): the SIP Domain that takes the PBX's calls to a number
-- connected with connect-to-sip, and the credential list mapped to it (deleted with the number). A webhook names the
-- domain (SipDomainSid): one domain is one number.
ALTER TABLE phone_numbers ADD COLUMN sip_domain_sid text, ADD COLUMN sip_credential_list_sid text;
CREATE UNIQUE INDEX phone_numbers_sip_domain ON phone_numbers (sip_domain_sid) WHERE sip_domain_sid IS NOT NULL;
