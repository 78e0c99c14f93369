import { Type } from 'typebox'
import { notFound } from '../../../http/errors.ts'
import { ObjectId } from '../../../http/schemas.ts'
import { findKnowledgeBase } from '../../knowledge-bases/queries.ts'
import { search } from '../../knowledge-bases/search.ts'
import { defineCapability } from '../registry.ts'
import { describedAs } from '../live.ts'
import { Description, Name } from '../../agents/settings-parts.ts'

/** Searches the tool's knowledge bases and answers the model with the best passages. */
export const apiRag = defineCapability({
  type: 'api_rag',
  label: 'Knowledge-base search',
  hint: 'The agent looks up facts in your knowledge bases while it talks.',
  schema: Type.Object({
    name: Name,
    description: Description,
    knowledge_base_ids: Type.Array(ObjectId, { minItems: 1, maxItems: 20, uniqueItems: true }),
    top_k: Type.Optional(Type.Integer({ minimum: 1, maximum: 20, description: 'passages returned per search (default 3)' }))
  }),
  defaults: { top_k: 3 },
  fieldLabels: { knowledge_base_ids: 'Knowledge bases', top_k: 'Passages per search' },
  check: async ({ db, agent }, settings) => {
    settings.knowledge_base_ids = settings.knowledge_base_ids.map((id) => id.toLowerCase())
    for (const id of settings.knowledge_base_ids) {
      if (await findKnowledgeBase(db, agent.user_id, id) === undefined) throw notFound(`knowledge base ${id} (body.settings.knowledge_base_ids)`)
    }
  },
  live: (row) => ({
    type: 'api_rag',
    spec: {
      name: row.settings.name,
      description: describedAs(row.settings, 'Search the knowledge base for facts that answer the caller\'s question.'),
      parameters: {
        type: 'object',
        properties: { query: { type: 'string', description: 'what to look for, in a few words or as a question' } },
        required: ['query']
      }
    },
    run: async (args, ctx) => {
      const query = typeof args.query === 'string' ? args.query.trim() : ''
      if (query === '') throw new Error('query is required: what to look for in the knowledge base')
      const hits = await search(ctx.db, ctx.userId, row.settings.knowledge_base_ids, query, row.settings.top_k ?? 3)
      if (hits.length === 0) return { output: `Nothing was found in the knowledge base for "${query}".` }
      return { output: JSON.stringify(hits.map((hit) => ({ content: hit.content, file: hit.file_name, ...(hit.page === null ? {} : { page: hit.page }) }))) }
    }
  })
})
