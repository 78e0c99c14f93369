import { readFileSync } from 'node:fs'
import path from 'node:path'
import { crc32, deflateRawSync } from 'node:zlib'
import type { FastifyInstance } from 'fastify'

export const FIXTURES = path.join(import.meta.dirname, '..', 'fixtures', 'knowledge-bases')

export function fixture (name: string): string {
  return readFileSync(path.join(FIXTURES, name), 'utf8')
}

/** Paragraphs of a text fixture: blocks separated by blank lines, each on one line. */
export function paragraphs (text: string): string[] {
  return text.split(/\n\s*\n/).map((p) => p.replace(/\s+/g, ' ').trim()).filter((p) => p !== '')
}

function wrap (paragraph: string, width: number): string[] {
  const lines: string[] = []
  let line = ''
  for (const word of paragraph.split(' ')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line)
      line = word
    } else {
      line = line === '' ? word : `${line} ${word}`
    }
  }
  if (line !== '') lines.push(line)
  return lines
}

const LINES_PER_PAGE = 48

/**
 * A real PDF (1.4, Helvetica, one text object per page) of ASCII paragraphs, wrapped and paginated the
 * way a word processor would, so that text extraction has pages and line breaks to deal with.
 */
export function makePdf (texts: string[]): Buffer {
  const lines = texts.flatMap((p) => [...wrap(p, 90), ''])
  const pages: string[][] = []
  for (let i = 0; i < lines.length; i += LINES_PER_PAGE) pages.push(lines.slice(i, i + LINES_PER_PAGE))
  const escape = (s: string) => s.replace(/[\\()]/g, (c) => '\\' + c)
  const objects: string[] = []
  const fontId = 3 + pages.length * 2
  objects[1] = '<< /Type /Catalog /Pages 2 0 R >>'
  objects[2] = `<< /Type /Pages /Kids [${pages.map((_, i) => `${3 + i * 2} 0 R`).join(' ')}] /Count ${pages.length} >>`
  pages.forEach((page, i) => {
    const stream = `BT /F1 11 Tf 14 TL 50 760 Td ${page.map((l) => `(${escape(l)}) Tj T*`).join(' ')} ET`
    objects[3 + i * 2] = `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 ${fontId} 0 R >> >> /Contents ${4 + i * 2} 0 R >>`
    objects[4 + i * 2] = `<< /Length ${Buffer.byteLength(stream, 'latin1')} >>\nstream\n${stream}\nendstream`
  })
  objects[fontId] = '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>'
  let out = '%PDF-1.4\n'
  const offsets: number[] = []
  for (let id = 1; id < objects.length; id++) {
    offsets[id] = Buffer.byteLength(out, 'latin1')
    out += `${id} 0 obj\n${objects[id]}\nendobj\n`
  }
  const xref = Buffer.byteLength(out, 'latin1')
  out += `xref\n0 ${objects.length}\n0000000000 65535 f \n`
  for (let id = 1; id < objects.length; id++) out += `${String(offsets[id]).padStart(10, '0')} 00000 n \n`
  out += `trailer\n<< /Size ${objects.length} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`
  return Buffer.from(out, 'latin1')
}

export interface ZipEntry {
  name: string
  data: Buffer
  /** Deflated rather than stored. */
  deflate?: boolean
  /** The unpacked size the archive claims (default: the true one); a lie, for tests of the reader. */
  declaredSize?: number
}

/** A ZIP archive, enough for an Office Open XML package. */
export function makeZip (entries: ZipEntry[]): Buffer {
  const locals: Buffer[] = []
  const centrals: Buffer[] = []
  let offset = 0
  for (const { name, data, deflate = false, declaredSize = data.length } of entries) {
    const fileName = Buffer.from(name, 'utf8')
    const crc = crc32(data)
    const packed = deflate ? deflateRawSync(data, { level: 9 }) : data
    const method = deflate ? 8 : 0
    const local = Buffer.alloc(30)
    local.writeUInt32LE(0x04034b50, 0)
    local.writeUInt16LE(20, 4)
    local.writeUInt16LE(method, 8)
    local.writeUInt16LE(0x21, 12) // 1980-01-01
    local.writeUInt32LE(crc, 14)
    local.writeUInt32LE(packed.length, 18)
    local.writeUInt32LE(declaredSize, 22)
    local.writeUInt16LE(fileName.length, 26)
    const central = Buffer.alloc(46)
    central.writeUInt32LE(0x02014b50, 0)
    central.writeUInt16LE(20, 4)
    central.writeUInt16LE(20, 6)
    central.writeUInt16LE(method, 10)
    central.writeUInt16LE(0x21, 14)
    central.writeUInt32LE(crc, 16)
    central.writeUInt32LE(packed.length, 20)
    central.writeUInt32LE(declaredSize, 24)
    central.writeUInt16LE(fileName.length, 28)
    central.writeUInt32LE(offset, 42)
    locals.push(local, fileName, packed)
    centrals.push(central, fileName)
    offset += local.length + fileName.length + packed.length
  }
  const directory = Buffer.concat(centrals)
  const end = Buffer.alloc(22)
  end.writeUInt32LE(0x06054b50, 0)
  end.writeUInt16LE(entries.length, 8)
  end.writeUInt16LE(entries.length, 10)
  end.writeUInt32LE(directory.length, 12)
  end.writeUInt32LE(offset, 16)
  return Buffer.concat([...locals, directory, end])
}

const xml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')

/** A Word document (DOCX) with one paragraph per string. */
export function makeDocx (texts: string[]): Buffer {
  return makeZip(docxParts(texts.map((t) => `<w:p><w:r><w:t xml:space="preserve">${xml(t)}</w:t></w:r></w:p>`).join('')))
}

/** The parts of a Word document whose body is `body` (WordprocessingML paragraphs). */
export function docxParts (body: string): ZipEntry[] {
  const declaration = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
  return [
    {
      name: '[Content_Types].xml',
      data: Buffer.from(declaration + '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">' +
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>' +
        '<Default Extension="xml" ContentType="application/xml"/>' +
        '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
    },
    {
      name: '_rels/.rels',
      data: Buffer.from(declaration + '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">' +
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>')
    },
    {
      name: 'word/document.xml',
      data: Buffer.from(declaration + `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>${body}</w:body></w:document>`)
    }
  ]
}

export interface FormFile { field?: string, name: string, content: Buffer | string, type?: string }

/** A multipart/form-data body as a browser or curl sends it: fields first unless `filesFirst`. */
async function multipartBody (fields: Record<string, string>, files: FormFile[], filesFirst = false): Promise<{ payload: Buffer, headers: Record<string, string> }> {
  const form = new FormData()
  const addFields = () => { for (const [k, v] of Object.entries(fields)) form.append(k, v) }
  const addFiles = () => {
    for (const f of files) form.append(f.field ?? 'file', new Blob([f.content], { type: f.type ?? 'application/octet-stream' }), f.name)
  }
  if (filesFirst) {
    addFiles()
    addFields()
  } else {
    addFields()
    addFiles()
  }
  const request = new Request('http://localhost/', { method: 'POST', body: form })
  return { payload: Buffer.from(await request.arrayBuffer()), headers: { 'content-type': request.headers.get('content-type')! } }
}

/** Sends a multipart form to a route of the app with the account's headers. */
export async function upload (app: FastifyInstance, url: string, headers: Record<string, string>, fields: Record<string, string>, files: FormFile[], filesFirst = false) {
  const body = await multipartBody(fields, files, filesFirst)
  return await app.inject({ method: 'POST', url, headers: { ...headers, ...body.headers }, payload: body.payload })
}
