-- The voice catalogue. Voices are installation-wide, not account-owned; `provider_voice_id` is what the
-- voice runtime hands to the speech provider. Preview URLs are given only where the provider publishes one.
CREATE TABLE voices (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
  name text NOT NULL,
  provider text NOT NULL,
  provider_voice_id text NOT NULL,
  gender text NOT NULL CHECK (gender IN ('female', 'male', 'neutral')),
  accent text NOT NULL,
  languages text[] NOT NULL,
  preview_url text,
  UNIQUE (provider, provider_voice_id)
);

INSERT INTO voices (id, name, provider, provider_voice_id, gender, accent, languages, preview_url) VALUES
  ('65a0f0000000000000000001', 'Alloy', 'openai', 'alloy', 'neutral', 'American', ARRAY['en-US'], 'https://cdn.openai.com/API/docs/audio/alloy.wav'),
  ('65a0f0000000000000000002', 'Ash', 'openai', 'ash', 'male', 'American', ARRAY['en-US'], 'https://cdn.openai.com/API/docs/audio/ash.wav'),
  ('65a0f0000000000000000003', 'Coral', 'openai', 'coral', 'female', 'American', ARRAY['en-US'], 'https://cdn.openai.com/API/docs/audio/coral.wav'),
  ('65a0f0000000000000000004', 'Echo', 'openai', 'echo', 'male', 'American', ARRAY['en-US'], 'https://cdn.openai.com/API/docs/audio/echo.wav'),
  ('65a0f0000000000000000005', 'Sage', 'openai', 'sage', 'female', 'American', ARRAY['en-US'], 'https://cdn.openai.com/API/docs/audio/sage.wav'),
  ('65a0f0000000000000000006', 'Shimmer', 'openai', 'shimmer', 'female', 'American', ARRAY['en-US'], 'https://cdn.openai.com/API/docs/audio/shimmer.wav'),
  ('65a0f0000000000000000007', 'Rachel', 'elevenlabs', '21m00Tcm4TlvDq8ikWAM', 'female', 'American', ARRAY['en-US','de-DE','fr-FR','es-ES'], NULL),
  ('65a0f0000000000000000008', 'Adam', 'elevenlabs', 'pNInz6obpgDQGcFmaJgB', 'male', 'American', ARRAY['en-US','de-DE','fr-FR','es-ES'], NULL),
  ('65a0f0000000000000000009', 'Antoni', 'elevenlabs', 'ErXwobaYiN019PkySvjV', 'male', 'American', ARRAY['en-US','de-DE','fr-FR','es-ES'], NULL),
  ('65a0f000000000000000000a', 'Sarah', 'elevenlabs', 'EXAVITQu4vr4xnSDxMaL', 'female', 'American', ARRAY['en-US','de-DE','fr-FR','es-ES'], NULL),
  ('65a0f000000000000000000b', 'Jenny', 'azure', 'en-US-JennyNeural', 'female', 'American', ARRAY['en-US'], NULL),
  ('65a0f000000000000000000c', 'Guy', 'azure', 'en-US-GuyNeural', 'male', 'American', ARRAY['en-US'], NULL),
  ('65a0f000000000000000000d', 'Sonia', 'azure', 'en-GB-SoniaNeural', 'female', 'British', ARRAY['en-GB'], NULL),
  ('65a0f000000000000000000e', 'Ryan', 'azure', 'en-GB-RyanNeural', 'male', 'British', ARRAY['en-GB'], NULL),
  ('65a0f000000000000000000f', 'Katja', 'azure', 'de-DE-KatjaNeural', 'female', 'German', ARRAY['de-DE'], NULL),
  ('65a0f0000000000000000010', 'Conrad', 'azure', 'de-DE-ConradNeural', 'male', 'German', ARRAY['de-DE'], NULL),
  ('65a0f0000000000000000011', 'Ingrid', 'azure', 'de-AT-IngridNeural', 'female', 'Austrian', ARRAY['de-AT'], NULL),
  ('65a0f0000000000000000012', 'Leni', 'azure', 'de-CH-LeniNeural', 'female', 'Swiss', ARRAY['de-CH'], NULL),
  ('65a0f0000000000000000013', 'Denise', 'azure', 'fr-FR-DeniseNeural', 'female', 'French', ARRAY['fr-FR'], NULL),
  ('65a0f0000000000000000014', 'Henri', 'azure', 'fr-FR-HenriNeural', 'male', 'French', ARRAY['fr-FR'], NULL),
  ('65a0f0000000000000000015', 'Elvira', 'azure', 'es-ES-ElviraNeural', 'female', 'Spanish', ARRAY['es-ES'], NULL),
  ('65a0f0000000000000000016', 'Jorge', 'azure', 'es-MX-JorgeNeural', 'male', 'Mexican', ARRAY['es-MX'], NULL),
  ('65a0f0000000000000000017', 'Elsa', 'azure', 'it-IT-ElsaNeural', 'female', 'Italian', ARRAY['it-IT'], NULL),
  ('65a0f0000000000000000018', 'Fenna', 'azure', 'nl-NL-FennaNeural', 'female', 'Dutch', ARRAY['nl-NL'], NULL),
  ('65a0f0000000000000000019', 'Francisca', 'azure', 'pt-BR-FranciscaNeural', 'female', 'Brazilian', ARRAY['pt-BR'], NULL);
