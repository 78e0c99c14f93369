import type { CapabilityRow } from '../../agents/queries.ts'
import { search } from '../../knowledge-bases/search.ts'
import type { LiveTool } from './types.ts'

/** Searches the tool's knowledge bases and answers the model with the best passages. */
export function apiRagTool (row: CapabilityRow): LiveTool {
  const knowledgeBaseIds = row.settings.knowledge_base_ids as string[]
  const topK = (row.settings.top_k as number | undefined) ?? 3
  return {
    type: 'api_rag',
    spec: {
      name: String(row.settings.name),
      description: (row.settings.description as string | undefined) || 'Search the knowledge base for facts that answer the caller\'s question.',
      parameters: {
        type: 'object',
        properties: { query: { type: 'string', description: 'what to look for, in a few words or as a question' } },
        required: ['query']
      }
    },
    run: async (args, ctx) => {
      const query = typeof args.query === 'string' ? args.query.trim() : ''
      if (query === '') throw new Error('query is required: what to look for in the knowledge base')
      const hits = await search(ctx.db, ctx.userId, knowledgeBaseIds, query, topK)
      if (hits.length === 0) return { output: `Nothing was found in the knowledge base for "${query}".` }
      return { output: JSON.stringify(hits.map((hit) => ({ content: hit.content, file: hit.file_name, ...(hit.page === null ? {} : { page: hit.page }) }))) }
    }
  }
}
