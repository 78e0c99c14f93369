import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { AUTH_ERRORS, COMPONENT, errors, ListOf, ObjectId, Paging } from '../../http/schemas.ts'
import type { Mailer } from '../../mail/mailer.ts'
import { customerRoutes } from './customers.ts'
import { listVoices } from './queries.ts'
import { subscriptionRoutes } from './subscription.ts'
import { workspaceRoutes } from './workspaces.ts'

const Gender = Type.Enum(['female', 'male', 'neutral'])

const Voice = Type.Object({
  _id: ObjectId,
  voice_name: Type.String(),
  provider: Type.String({ description: 'speech provider: openai, elevenlabs, azure' }),
  provider_voice_id: Type.String({ description: "the provider's own name for the voice, handed to the voice runtime" }),
  gender: Gender,
  accent: Type.String(),
  languages: Type.Array(Type.String(), { description: 'BCP-47 language tags the voice speaks' }),
  preview_url: Type.Union([Type.String(), Type.Null()], { description: 'sample recording published by the provider, where there is one' })
}, { [COMPONENT]: 'Voice' })

const VoiceQuery = Type.Object({
  provider: Type.Optional(ListOf(Type.String(), 'providers')),
  gender: Type.Optional(ListOf(Gender, 'genders')),
  language: Type.Optional(Type.String({ minLength: 2, maxLength: 35, description: 'language tag; `de` matches de-DE, de-AT and de-CH' })),
  ...Paging
})

/** Voices here; customers, workspaces and the subscription in their own files. */
export const accountRoutes: FastifyPluginAsyncTypebox<{ db: DB, mailer: Mailer, publicBaseUrl: string }> = async (app, { db, mailer, publicBaseUrl }) => {
  await app.register(customerRoutes, { db })
  await app.register(workspaceRoutes, { db, mailer, publicBaseUrl })
  await app.register(subscriptionRoutes, { db })

  app.get('/voice/list', {
    schema: {
      tags: ['voices'],
      summary: 'List voices',
      description: 'The voice catalogue an agent picks its `voice.voice_id` from.',
      querystring: VoiceQuery,
      response: { 200: Type.Array(Voice), ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => {
    const voices = await listVoices(db, request.query)
    return voices.map(({ id, name, ...voice }) => ({ _id: id, voice_name: name, ...voice }))
  })
}
