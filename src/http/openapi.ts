import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'

/** `/openapi.json` generated from the route schemas, and Swagger UI at `/docs` served from the package. */
export async function registerOpenApi (app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Switchboard API',
        version: '1',
        description: 'Voice agents, calls, knowledge bases and post-call deliveries. Every `/v1` route takes an `x-api-key` header.'
      },
      components: {
        securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' } }
      },
      security: [{ apiKey: [] }]
    },
    convertConstToEnum: false
  })
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { deepLinking: true } })
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())
}
