import { createWriteStream } from 'node:fs'
import { mkdtemp, open, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import type { MultipartFile } from '@fastify/multipart'
import type { FastifyRequest } from 'fastify'
import { fileTypeFromBuffer } from 'file-type'
import type { Transaction } from 'kysely'
import { Type } from 'typebox'
import { newId } from '../../db/ids.ts'
import type { Database, KnowledgeFileType } from '../../db/schema.ts'
import { badRequest, HttpError } from '../../http/errors.ts'
import { checkText } from '../../http/validation.ts'
import { insertFile, insertFilePart } from './queries.ts'

export const ACCEPTED_TYPES = 'PDF, DOCX, TXT, Markdown, CSV or HTML'

/** The create form's fields besides the file (the API's and the console's); checked once the streamed form has been read. */
export const FormFields = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100 }),
  description: Type.String({ minLength: 1, maxLength: 300 }),
  folder: Type.Optional(Type.String({ maxLength: 50, description: 'default ""' })),
  language: Type.Optional(Type.String({ format: 'language-tag', maxLength: 35, description: 'BCP-47 tag of the documents\' language; default: the account\'s' }))
})

/** A file is written in rows of this size, so an upload holds at most about this much of it in memory. */
const PART_BYTES = 1024 * 1024
/** Form fields are short (the longest, `description`, is 300 characters); 4 KB leaves room for UTF-8. */
const MAX_FIELD_BYTES = 4096
const MAX_FIELDS = 20
const MAX_FILE_NAME = 255

export interface UploadOptions {
  /** The form field that carries the files: `file` or `files`. */
  fileField: string
  /** Form fields read besides the files; others are ignored, as unknown body properties are. */
  fieldNames: readonly string[]
  /** Most files this request may carry, and what a client that sends more is told (413). */
  maxFiles: number
  tooManyFiles: string
  maxFileBytes: number
  /**
   * Runs on the first part before any other part is read: with it when that part is a text field, with
   * undefined when it is a file or the form is empty. The console checks its CSRF token here, so that no
   * byte of a forged upload is written anywhere.
   */
  firstPart?: (field: { name: string, value: string } | undefined) => void
}

export interface ReceivedFile { id: string, file_name: string, file_type: KnowledgeFileType, file_size: number }

/** A file of the request, checked and written to a temporary file, not yet stored. */
export interface SpooledFile { file_name: string, file_type: KnowledgeFileType, file_size: number, path: string }

export interface Upload { fields: Record<string, string>, files: SpooledFile[] }

const unsupported = (message: string) => new HttpError(415, 'unsupported_file_type', `${message}; accepted are ${ACCEPTED_TYPES} files`)

/**
 * Reads a multipart upload into temporary files, checking every limit and type on the way, and runs `use`
 * with them; the files are removed afterwards whatever happens. Nothing touches the database while the body
 * arrives, so a client sending slowly holds a file descriptor, not a pooled connection inside a transaction.
 * `fields` receives the text fields as they are read: a form refused for its file still has what was typed.
 */
export async function withUpload<T> (request: FastifyRequest, options: UploadOptions, use: (upload: Upload) => Promise<T>, fields: Record<string, string> = {}): Promise<T> {
  if (!request.isMultipart()) {
    throw new HttpError(415, 'multipart_required', `send the form as multipart/form-data with the file in the \`${options.fileField}\` field`)
  }
  const dir = await mkdtemp(path.join(tmpdir(), 'switchboard-upload-'))
  try {
    return await use(await receiveUpload(request, options, dir, fields))
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

async function receiveUpload (request: FastifyRequest, options: UploadOptions, dir: string, fields: Record<string, string>): Promise<Upload> {
  const parts = request.parts({
    limits: {
      fileSize: options.maxFileBytes,
      // One more than allowed reaches the loop below, which answers with a message that names the limit.
      files: options.maxFiles + 1,
      fields: MAX_FIELDS,
      fieldSize: MAX_FIELD_BYTES,
      parts: options.maxFiles + MAX_FIELDS + 1
    }
  })[Symbol.asyncIterator]()
  const files: SpooledFile[] = []
  let first = true
  for (let next = await clientInput(parts.next()); next.done !== true; next = await clientInput(parts.next())) {
    const part = next.value
    if (first) {
      first = false
      if (options.firstPart !== undefined) {
        options.firstPart(part.type === 'field' ? { name: part.fieldname, value: String(part.value) } : undefined)
        continue
      }
    }
    if (part.type === 'field') {
      if (part.fieldname === options.fileField) throw badRequest(`body.${options.fileField} must be a file, not a text value`, 'validation_error')
      if (!options.fieldNames.includes(part.fieldname)) continue
      if (part.valueTruncated) throw badRequest(`body.${part.fieldname} is too long`, 'validation_error')
      fields[part.fieldname] = checkText(String(part.value), `body.${part.fieldname}`)
      continue
    }
    if (part.fieldname !== options.fileField) {
      throw badRequest(`unexpected file field "${part.fieldname}"; send files in \`${options.fileField}\``, 'unexpected_file_field')
    }
    if (files.length === options.maxFiles) throw new HttpError(413, 'too_many_files', options.tooManyFiles)
    files.push(await spoolFile(part, options, path.join(dir, String(files.length))))
  }
  if (first) options.firstPart?.(undefined)
  return { fields, files }
}

/** Stores spooled files in the transaction, PART_BYTES a row. */
export async function storeFiles (trx: Transaction<Database>, userId: string, knowledgeBaseId: string, files: SpooledFile[]): Promise<ReceivedFile[]> {
  const stored: ReceivedFile[] = []
  for (const file of files) {
    const id = newId()
    await insertFile(trx, userId, { id, knowledge_base_id: knowledgeBaseId, file_name: file.file_name, file_type: file.file_type, file_size: file.file_size })
    const handle = await open(file.path)
    try {
      const buffer = Buffer.alloc(PART_BYTES)
      for (let n = 0, position = 0; position < file.file_size; n++) {
        const { bytesRead } = await handle.read(buffer, 0, PART_BYTES, position)
        if (bytesRead === 0) throw new Error(`temporary file ${file.path} ended early`)
        await insertFilePart(trx, userId, id, n, Buffer.from(buffer.subarray(0, bytesRead)))
        position += bytesRead
      }
    } finally {
      await handle.close()
    }
    stored.push({ id, file_name: file.file_name, file_type: file.file_type, file_size: file.file_size })
  }
  return stored
}

/** Errors of the multipart parser are the client's: a limit is 413, anything else malformed input. */
async function clientInput<T> (promise: Promise<T>): Promise<T> {
  try {
    return await promise
  } catch (err) {
    throw clientError(err)
  }
}

function clientError (err: unknown): HttpError {
  if (err instanceof HttpError) return err
  const { code, message } = err as { code?: string, message?: string }
  if (code === 'FST_PARTS_LIMIT' || code === 'FST_FIELDS_LIMIT') return new HttpError(413, 'too_many_fields', `the form has more than ${MAX_FIELDS} fields`)
  return badRequest(`malformed multipart body: ${message ?? 'unreadable'}`, 'malformed_multipart')
}

async function * clientStream (stream: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  try {
    for await (const chunk of stream) yield chunk
  } catch (err) {
    throw clientError(err)
  }
}

function fileName (raw: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is stripped here
  const name = raw.replace(/[\u0000-\u001f\u007f]/g, '').trim()
  if (name === '') throw badRequest('every file needs a file name (the filename of its form part)', 'invalid_file_name')
  if (name.length > MAX_FILE_NAME) throw badRequest(`file name "${name.slice(0, 40)}…" is longer than ${MAX_FILE_NAME} characters`, 'invalid_file_name')
  return name
}

async function spoolFile (part: MultipartFile, options: UploadOptions, target: string): Promise<SpooledFile> {
  const name = fileName(part.filename ?? '')
  const text = new TextCheck()
  let type: KnowledgeFileType | undefined
  let size = 0
  // The first PART_BYTES decide the type, before more of the file is read.
  let head: Buffer[] = []
  const detect = async () => {
    type = await detectType(Buffer.concat(head), name, part.mimetype)
    head = []
  }
  async function * checked (): AsyncGenerator<Buffer> {
    for await (const chunk of clientStream(part.file)) {
      size += chunk.length
      text.push(chunk)
      if (type === undefined) {
        head.push(chunk)
        if (size >= PART_BYTES) await detect()
      }
      yield chunk
    }
  }
  await pipeline(checked, createWriteStream(target))
  // Over the limit the parser cuts the file short without an error: this is where that is noticed.
  if (part.file.truncated) {
    throw new HttpError(413, 'file_too_large', `${name} is larger than ${options.maxFileBytes / 1024 / 1024} MB, the most a file may have`)
  }
  if (size === 0) throw badRequest(`${name} is empty`, 'empty_file')
  if (type === undefined) await detect()
  if (type !== 'pdf' && type !== 'docx' && !text.isText) throw unsupported(`${name} holds binary data of an unknown type`)
  return { file_name: name, file_type: type!, file_size: size, path: target }
}

/** Watches a stream for the control bytes that text never contains (tab, line breaks and form feed aside). */
class TextCheck {
  isText = true

  push (chunk: Buffer): void {
    if (!this.isText) return
    for (const byte of chunk) {
      if (byte < 0x09 || (byte > 0x0d && byte < 0x20) || byte === 0x7f) {
        this.isText = false
        return
      }
    }
  }
}

const TEXT_EXTENSIONS: Record<string, KnowledgeFileType> = {
  txt: 'txt', text: 'txt', md: 'markdown', markdown: 'markdown', csv: 'csv', html: 'html', htm: 'html', xhtml: 'html'
}
const TEXT_MEDIA_TYPES: Record<string, KnowledgeFileType> = {
  'text/plain': 'txt', 'text/markdown': 'markdown', 'text/x-markdown': 'markdown', 'text/csv': 'csv', 'text/html': 'html', 'application/xhtml+xml': 'html'
}

/**
 * The type by content: PDF and DOCX by their signature, anything else with a signature is refused,
 * and content without one is text (checked to the end as it streams) whose name or media type says
 * which kind. A name that claims PDF or DOCX for content that is not one is refused.
 */
export async function detectType (head: Buffer, name: string, mediaType: string): Promise<KnowledgeFileType> {
  const detected = await fileTypeFromBuffer(head)
  const extension = /\.([^.]+)$/.exec(name)?.[1].toLowerCase() ?? ''
  if (detected?.ext === 'pdf') return 'pdf'
  if (detected?.ext === 'docx') return 'docx'
  // XHTML starts with an XML declaration; it is text like any other HTML.
  if (detected !== undefined && detected.ext !== 'xml') throw unsupported(`${name} is ${detected.mime}`)
  if (extension === 'pdf' || extension === 'docx') throw unsupported(`${name} is not a ${extension.toUpperCase()} document by its content`)
  if (TEXT_EXTENSIONS[extension] !== undefined) return TEXT_EXTENSIONS[extension]
  if (extension !== '') throw unsupported(`.${extension} files are not supported`)
  const byMediaType = TEXT_MEDIA_TYPES[mediaType.split(';')[0].trim().toLowerCase()]
  if (byMediaType !== undefined) return byMediaType
  return /^\s*(<!doctype html|<html)/i.test(head.subarray(0, 1024).toString('latin1')) ? 'html' : 'txt'
}
