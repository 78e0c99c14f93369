import multipart from '@fastify/multipart'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type, type Static } from 'typebox'
import type { DB } from '../../db/database.ts'
import { badRequest, HttpError, invalidInput, type AjvIssue } from '../../http/errors.ts'
import { AUTH_ERRORS, errors, IdParams, Paging } from '../../http/schemas.ts'
import { checkText, compileBodySchema } from '../../http/validation.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { campaignResultsCsv, campaignView, createCampaign, steerCampaign, toCampaign, type CampaignAction } from './campaigns.ts'
import { parseContactsCsv, type RawContact } from './contacts-import.ts'
import { campaignProgress, listCampaigns } from './queries.ts'
import { readUpload } from './upload.ts'
import { Campaign, CampaignCreated, CampaignJsonBody, CampaignSettings, type CampaignSettingsInput } from './schemas.ts'

const TAGS = ['campaigns']

const checkSettings = compileBodySchema(CampaignSettings)

/** The `settings` JSON text of a CSV upload, checked as a JSON body's members are. */
function readSettings (text: string | undefined, field: string): CampaignSettingsInput {
  if (text === undefined) throw badRequest(`${field} is required: the campaign's settings as JSON (name, agent_id, from_number, …)`, 'validation_error')
  let value: unknown
  try {
    value = JSON.parse(checkText(text, field))
  } catch (err) {
    if (err instanceof HttpError) throw err
    throw badRequest(`${field} is not valid JSON`, 'validation_error')
  }
  if (!checkSettings(value)) throw invalidInput(field, checkSettings.errors![0] as AjvIssue)
  return value as CampaignSettingsInput
}

/** An upload refused part-way leaves the rest of its body unread: the connection cannot carry another request. */
async function closeConnection (_request: FastifyRequest, reply: FastifyReply): Promise<void> {
  reply.header('connection', 'close')
}

const LIMITS_TEXT = 'Limits: CAMPAIGN_MAX_ROWS contacts (default 50,000; more: 413 `too_many_rows`) and CAMPAIGN_MAX_FILE_MB a file or body (default 10; more: 413).'

export const campaignRoutes: FastifyPluginAsyncTypebox<{ db: DB, jobs: JobSender }> = async (app, { db, jobs }) => {
  const limits = jobs.config.campaigns
  await app.register(multipart, { throwFileSizeLimit: false })
  app.addContentTypeParser('text/csv', { parseAs: 'string', bodyLimit: limits.maxFileBytes }, (_request, body, done) => { done(null, body) })

  app.post('/campaigns', {
    bodyLimit: limits.maxFileBytes,
    schema: {
      tags: TAGS,
      summary: 'Create a campaign: an agent calls a list of contacts',
      description: 'Three ways to send the list. `application/json`: the settings with `contacts` (`phone_number`, optional `timezone` and `dynamic_context`). ' +
        '`multipart/form-data`: a `settings` field (the settings as JSON text) and a `contacts` file (CSV). `text/csv`: the CSV as the body and the settings as JSON in the `settings` query parameter. ' +
        'A CSV has a header row with a phone number column (`phone_number`, or `phone_column`), an optional `timezone` column, and any other columns, which become each call\'s `dynamic_context`. ' +
        'Each row is checked: invalid numbers, duplicates and numbers on the do-not-call list are reported in `report` and not imported; a file that cannot be read is refused whole (400 `invalid_csv`). ' +
        'Nothing is stored unless the whole list is. ' + LIMITS_TEXT,
      querystring: Type.Object({ settings: Type.Optional(Type.String({ maxLength: 64 * 1024, description: 'text/csv bodies: the settings as JSON' })) }),
      body: {
        content: {
          'application/json': { schema: CampaignJsonBody },
          'multipart/form-data': { schema: Type.Object({ settings: Type.String({ description: 'the settings as JSON' }), contacts: Type.String({ format: 'binary', description: 'CSV' }) }) },
          'text/csv': { schema: Type.String() }
        }
      } as never,
      response: { 201: CampaignCreated, ...errors(...AUTH_ERRORS, 404, 409, 413, 415, 422) }
    },
    onError: closeConnection
  }, async (request, reply) => {
    const { userId } = request
    let settings: CampaignSettingsInput
    let list: { contacts: RawContact[], columns: string[], badRows: Array<{ row: number, phone_number: string, reason: string }> }
    if (request.isMultipart()) {
      const upload = await readUpload(request, { maxFileBytes: limits.maxFileBytes, maxFields: 5 })
      settings = readSettings(upload.fields.settings, 'body.settings')
      if (upload.csv === undefined) throw badRequest('body.contacts (the CSV file) is required', 'validation_error')
      list = await parseContactsCsv(upload.csv, settings.phone_column ?? 'phone_number', limits.maxRows)
    } else if (typeof request.body === 'string') {
      settings = readSettings(request.query.settings, 'query.settings')
      list = await parseContactsCsv(request.body, settings.phone_column ?? 'phone_number', limits.maxRows)
    } else {
      const body = request.body as Static<typeof CampaignJsonBody>
      if (body.contacts.length > limits.maxRows) throw new HttpError(413, 'too_many_rows', `a campaign takes at most ${limits.maxRows} contacts (CAMPAIGN_MAX_ROWS)`)
      settings = body
      const columns = [...new Set(body.contacts.flatMap((c) => Object.keys(c.dynamic_context ?? {})))]
      list = {
        contacts: body.contacts.map((c, i) => ({ row: i + 1, phone_number: c.phone_number, ...(c.timezone !== undefined && { timezone: c.timezone }), columns: c.dynamic_context ?? {} })),
        columns,
        badRows: []
      }
    }
    return reply.code(201).send(await createCampaign(db, jobs, userId, settings, list))
  })

  app.get('/campaigns', {
    schema: { tags: TAGS, summary: "List the account's campaigns", description: 'Newest first.', querystring: Type.Object(Paging), response: { 200: Type.Array(Campaign), ...errors(...AUTH_ERRORS) } }
  }, async (request) => {
    const rows = await listCampaigns(db, request.userId, { limit: request.query.limit ?? 100, skip: request.query.skip ?? 0 })
    const progress = await campaignProgress(db, rows.map((row) => row.id))
    return rows.map((row) => toCampaign(row, progress.get(row.id)))
  })

  app.get('/campaigns/:id', {
    schema: { tags: TAGS, summary: 'Get a campaign with its progress', params: IdParams, response: { 200: Campaign, ...errors(...AUTH_ERRORS, 404) } }
  }, async (request) => await campaignView(db, request.userId, request.params.id))

  const actions: Array<[CampaignAction, string]> = [
    ['pause', 'Pause a campaign: no new calls; calls in progress go on'],
    ['resume', 'Resume a paused campaign'],
    ['cancel', 'Cancel a campaign: contacts not called yet never are; calls in progress end as they will']
  ]
  for (const [action, summary] of actions) {
    app.post(`/campaigns/:id/${action}`, {
      schema: { tags: TAGS, summary, description: 'A completed or cancelled campaign: 409 `campaign_finished`.', params: IdParams, response: { 200: Campaign, ...errors(...AUTH_ERRORS, 404, 409) } }
    }, async (request) => await steerCampaign(db, jobs, request.userId, request.params.id, action))
  }

  app.get('/campaigns/:id/results.csv', {
    schema: {
      tags: TAGS,
      summary: "A campaign's results as CSV",
      operationId: 'getCampaignResultsCsv',
      description: 'One row per contact in list order: `phone_number`, the list\'s columns, `timezone`, `status`, `outcome`, `attempts`, `last_call_id`, `call_summary`, then one `analysis.<field>` column per field of the calls\' `custom_analysis_data`.',
      params: IdParams,
      produces: ['text/csv'],
      response: { 200: Type.String({ description: 'CSV, UTF-8, with a header row' }), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    const { filename, csv } = await campaignResultsCsv(db, request.userId, request.params.id)
    reply.header('content-type', 'text/csv; charset=utf-8')
    reply.header('content-disposition', `attachment; filename="${filename}"`)
    return reply.send(csv as never) // streamed CSV text
  })
}
