import t from 'tap'
import { createAccount, setup } from '../helpers/app.ts'

t.test('GET /v1/voice/list answers the catalogue', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  const res = await app.inject({ method: 'GET', url: '/v1/voice/list?provider=openai', headers })
  t.equal(res.statusCode, 200)
  const voices = res.json()
  t.ok(voices.length > 0)
  for (const voice of voices) {
    t.match(voice, {
      _id: /^[0-9a-f]{24}$/,
      voice_name: String,
      provider: 'openai',
      provider_voice_id: String,
      gender: /^(female|male|neutral)$/,
      accent: String,
      languages: Array,
      preview_url: /^https:\/\//
    })
  }
  const alloy = voices.find((v: { provider_voice_id: string }) => v.provider_voice_id === 'alloy')
  t.same(Object.keys(alloy).sort(), ['_id', 'accent', 'gender', 'languages', 'preview_url', 'provider', 'provider_voice_id', 'voice_name'])
})
