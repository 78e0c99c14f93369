-- Voicemail and call screening (issue 31, docs/voice.md "Voicemail"): an agent's voicemail_settings (detection of
-- answering machines on its outbound phone calls, and what it does on one), and what the carrier's detection said
-- of a call (Twilio's AnsweredBy), kept with the call so that a session that opens after the verdict still acts on it.
-- Both columns take a constant default: adding them rewrites no row.
ALTER TABLE agents ADD COLUMN voicemail_settings jsonb NOT NULL DEFAULT '{}';
-- human, machine_start, machine_end_beep, machine_end_silence, machine_end_other, fax, unknown; NULL: no verdict
-- (detection off, or none came yet).
ALTER TABLE calls ADD COLUMN answered_by text CHECK (answered_by IN ('human', 'machine_start', 'machine_end_beep', 'machine_end_silence', 'machine_end_other', 'fax', 'unknown'));
