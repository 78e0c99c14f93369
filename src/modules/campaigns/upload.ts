import type { FastifyRequest } from 'fastify'
import { badRequest, HttpError } from '../../http/errors.ts'
import { checkText } from '../../http/validation.ts'

// A campaign's multipart upload, the API's (a `settings` field) and the console's form (one field per setting): its
// text fields and its `contacts` CSV file, read whole within the size limit.

export interface UploadOptions {
  maxFileBytes: number
  /** Text fields the form may carry (the console's has one per setting and per number). */
  maxFields: number
  /**
   * Runs on the first part before any other is read: with it when it is a text field, with undefined otherwise. The
   * console checks its CSRF token here, so that no byte of a forged upload is read.
   */
  firstPart?: (field: { name: string, value: string } | undefined) => void
}

const tooLarge = (maxFileBytes: number) => new HttpError(413, 'file_too_large', `the CSV file is larger than ${maxFileBytes / 1024 / 1024} MB (CAMPAIGN_MAX_FILE_MB)`)

/**
 * The text fields (the first of a repeated name) and the CSV of the `contacts` file, if one was sent (a form's file
 * input left empty sends none). The fields go into `fields`, so that a caller keeps those read before a refusal.
 */
export async function readUpload (request: FastifyRequest, options: UploadOptions, fields: Record<string, string> = {}): Promise<{ fields: Record<string, string>, csv: string | undefined }> {
  let csv: string | undefined
  let first = true
  try {
    for await (const part of request.parts({ limits: { fileSize: options.maxFileBytes, files: 1, fields: options.maxFields, fieldSize: 64 * 1024 } })) {
      if (first) {
        first = false
        if (options.firstPart !== undefined) {
          options.firstPart(part.type === 'field' ? { name: part.fieldname, value: String(part.value) } : undefined)
          if (part.type === 'field') continue
        }
      }
      if (part.type === 'field') {
        if (part.valueTruncated) throw badRequest(`body.${part.fieldname} is too long`, 'validation_error')
        fields[part.fieldname] ??= checkText(String(part.value), `body.${part.fieldname}`)
        continue
      }
      if (part.fieldname !== 'contacts') throw badRequest(`unexpected file field "${part.fieldname}"; send the CSV file in \`contacts\``, 'unexpected_file_field')
      const buffer = await part.toBuffer()
      if (part.file.truncated) throw tooLarge(options.maxFileBytes)
      if (part.filename === '' && buffer.length === 0) continue
      csv = buffer.toString('utf8')
    }
  } catch (err) {
    if (err instanceof HttpError) throw err
    const { code, message } = err as { code?: string, message?: string }
    if (code === 'FST_REQ_FILE_TOO_LARGE') throw tooLarge(options.maxFileBytes)
    if (code === 'FST_FILES_LIMIT') throw new HttpError(413, 'too_many_files', 'send one CSV file')
    if (code === 'FST_PARTS_LIMIT' || code === 'FST_FIELDS_LIMIT') throw new HttpError(413, 'too_many_fields', 'the form has too many fields')
    throw badRequest(`malformed multipart body: ${message ?? 'unreadable'}`, 'malformed_multipart')
  }
  if (first) options.firstPart?.(undefined)
  return { fields, csv }
}
