import { parseString } from 'fast-csv'
import type { KnowledgeFileType } from '../../db/schema.ts'
import type { NewPassage } from './queries.ts'
import { zipProblem, type ZipLimits } from './zip.ts'

/** Text of a document in the parts it comes in: a PDF's pages, the whole text of the other types. */
export interface Section { text: string, page: number | null }

/** A document that cannot be read; its message is shown on the file. */
export class UnreadableDocument extends Error {}

/** What one file may cost to read: the archive a DOCX unpacks, and the passages any file yields. */
export interface ExtractionLimits { zip: ZipLimits, maxPassages: number }

/**
 * A file's passages. Runs in a worker thread (extract-worker.ts): a file that yields more than `maxPassages`
 * fails rather than being cut short, so that what an agent finds is never silently the first part of a file.
 */
export async function extractPassages (type: KnowledgeFileType, content: Buffer, limits: ExtractionLimits): Promise<NewPassage[]> {
  const passages = splitPassages(await readDocument(type, content, limits.zip))
  if (passages.length > limits.maxPassages) {
    throw new UnreadableDocument(`the file yields ${passages.length} passages, more than the ${limits.maxPassages} a file may have; split it into smaller files`)
  }
  return passages
}

async function readDocument (type: KnowledgeFileType, content: Buffer, zipLimits: ZipLimits): Promise<Section[]> {
  switch (type) {
    case 'pdf': return await readPdf(content)
    case 'docx': return [{ text: await readDocx(content, zipLimits), page: null }]
    case 'html': return [{ text: await readHtml(decodeText(content)), page: null }]
    case 'csv': return [{ text: await readCsv(decodeText(content)), page: null }]
    case 'txt':
    case 'markdown': return [{ text: decodeText(content), page: null }]
  }
}

/** UTF-8 (a BOM is dropped); a file that is not valid UTF-8 is read as Windows-1252, a superset of Latin-1. */
export function decodeText (content: Buffer): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(content)
  } catch {
    return new TextDecoder('windows-1252').decode(content)
  }
}

// pdf.js, mammoth and htmlparser2 are large: loaded when the first such document is read, so that API processes,
// which never read one, do not carry them.
async function readPdf (content: Buffer): Promise<Section[]> {
  const { extractText, getDocumentProxy } = await import('unpdf')
  let pdf: Awaited<ReturnType<typeof getDocumentProxy>>
  try {
    // Errors only: pdf.js warns on stdout about every repair it makes to a damaged file.
    pdf = await getDocumentProxy(new Uint8Array(content), { verbosity: 0 })
  } catch (err) {
    throw new UnreadableDocument(`the PDF cannot be read: ${(err as Error).message}`)
  }
  try {
    const { text } = await extractText(pdf, { mergePages: false })
    return text.map((page, i) => ({ text: page, page: i + 1 }))
  } catch (err) {
    throw new UnreadableDocument(`the PDF's text cannot be read: ${(err as Error).message}`)
  } finally {
    await pdf.loadingTask.destroy()
  }
}

async function readDocx (content: Buffer, limits: ZipLimits): Promise<string> {
  const problem = await zipProblem(content, limits, 'the DOCX')
  if (problem !== undefined) throw new UnreadableDocument(problem)
  const { default: mammoth } = await import('mammoth')
  try {
    return (await mammoth.extractRawText({ buffer: content })).value
  } catch (err) {
    throw new UnreadableDocument(`the DOCX cannot be read: ${(err as Error).message}`)
  }
}

// Elements whose text is not content, and elements that end a block of text.
const SKIPPED = new Set(['script', 'style', 'noscript', 'template', 'svg', 'head'])
const BLOCKS = new Set(['address', 'article', 'aside', 'blockquote', 'dd', 'div', 'dl', 'dt', 'figcaption', 'footer',
  'form', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'header', 'hr', 'li', 'main', 'nav', 'ol', 'p', 'pre', 'section',
  'table', 'tr', 'td', 'th', 'ul', 'title'])

/** The visible text of an HTML page, a blank line between blocks, entities decoded. */
export async function readHtml (html: string): Promise<string> {
  const { Parser } = await import('htmlparser2')
  const out: string[] = []
  let skipping = 0
  let inTitle = false
  const parser = new Parser({
    onopentag (name) {
      if (name === 'title') inTitle = true
      else if (SKIPPED.has(name)) skipping++
      if (name === 'br') out.push('\n')
      else if (BLOCKS.has(name)) out.push('\n\n')
    },
    ontext (text) {
      // The title names the page: keep it although it sits in <head>.
      if (skipping === 0 || inTitle) out.push(text)
    },
    onclosetag (name) {
      if (name === 'title') inTitle = false
      else if (SKIPPED.has(name)) skipping = Math.max(0, skipping - 1)
      if (BLOCKS.has(name)) out.push('\n\n')
    }
  }, { decodeEntities: true })
  parser.write(html)
  parser.end()
  return out.join('').replace(/[ \t\r\f\v]+/g, ' ').replace(/ *\n */g, '\n').replace(/\n{3,}/g, '\n\n').trim()
}

/** One line per row, each value named by its column ("city: Lyon; seats: 12"), so a passage found alone still says what its numbers are. */
async function readCsv (text: string): Promise<string> {
  const rows: string[][] = []
  await new Promise<void>((resolve, reject) => {
    parseString(text, { ignoreEmpty: true })
      .on('data', (row: string[]) => rows.push(row))
      .on('error', (err: Error) => reject(new UnreadableDocument(`the CSV cannot be read: ${err.message}`)))
      .on('end', () => resolve())
  })
  const [header = [], ...body] = rows
  if (body.length === 0) return header.join('; ')
  return body.map((row) => row.map((value, i) => header[i] === undefined || header[i] === '' ? value : `${header[i]}: ${value}`).join('; ')).join('\n')
}

/** Passages aim at this many characters and never pass MAX_PASSAGE (short enough to rank sharply and read aloud). */
const TARGET_PASSAGE = 600
const MAX_PASSAGE = 1000

interface Span { start: number, end: number }

/** Spans of `text` between the matches of `separator`, empty ones left out. */
function spansBetween (text: string, span: Span, separator: RegExp): Span[] {
  const out: Span[] = []
  let start = span.start
  const part = text.slice(span.start, span.end)
  for (const match of part.matchAll(separator)) {
    const end = span.start + match.index + match[0].length
    if (text.slice(start, end).trim() !== '') out.push({ start, end })
    start = end
  }
  if (text.slice(start, span.end).trim() !== '') out.push({ start, end: span.end })
  return out
}

// A long paragraph is cut at sentence ends first (a PDF page is one paragraph of visual lines that
// break mid-sentence), then at line breaks (CSV rows), then between words.
const FINER = [/(?<=[.!?])\s+/g, /\n/g, /\s+/g]

/** Units no longer than MAX_PASSAGE (a single word longer than that is cut). */
function units (text: string, span: Span, level = 0): Span[] {
  if (span.end - span.start <= MAX_PASSAGE) return [span]
  if (level === FINER.length) {
    const out: Span[] = []
    for (let start = span.start; start < span.end; start += MAX_PASSAGE) out.push({ start, end: Math.min(span.end, start + MAX_PASSAGE) })
    return out
  }
  return spansBetween(text, span, FINER[level]).flatMap((s) => units(text, s, level + 1))
}

/**
 * Splits the sections into passages: paragraphs (blank lines) packed together up to TARGET_PASSAGE,
 * long ones cut finer. A passage stays within one section (one PDF page); its char_start and
 * char_end are offsets into the sections' texts joined by blank lines.
 */
export function splitPassages (sections: Section[]): NewPassage[] {
  const passages: NewPassage[] = []
  let offset = 0
  for (const section of sections) {
    const text = section.text
    let current: Span | undefined
    const flush = () => {
      if (current === undefined) return
      passages.push({
        position: passages.length,
        page: section.page,
        char_start: offset + current.start,
        char_end: offset + current.end,
        content: text.slice(current.start, current.end).replace(/\s+/g, ' ').trim()
      })
      current = undefined
    }
    const paragraphs = spansBetween(text, { start: 0, end: text.length }, /\n[ \t]*\n\s*/g)
    for (const unit of paragraphs.flatMap((p) => units(text, p))) {
      if (current !== undefined && unit.end - current.start > TARGET_PASSAGE) flush()
      current = current === undefined ? { ...unit } : { start: current.start, end: unit.end }
    }
    flush()
    offset += text.length + 2
  }
  return passages.filter((p) => p.content !== '').map((p, position) => ({ ...p, position }))
}
