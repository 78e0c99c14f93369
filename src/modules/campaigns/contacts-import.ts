import { parseString } from 'fast-csv'
import { badRequest, HttpError } from '../../http/errors.ts'
import { storable } from '../../http/validation.ts'
import { knownZone, normalisePhone, zoneOfNumber } from './hours.ts'

// A campaign's contacts, read from a CSV upload or a JSON list and checked row by row (docs/campaigns.md, "Contacts").
// Rows that cannot be called are reported, never imported; a file that cannot be read is refused whole.

/** The most columns a list may have, and the longest column name and value. */
export const MAX_COLUMNS = 50
const MAX_COLUMN_NAME = 64
const MAX_VALUE = 1000

/** One row as given: its number in the list (1 = the first after the header), its phone number and columns. */
export interface RawContact { row: number, phone_number: string, timezone?: string, columns: Record<string, string> }

export interface Contact { row: number, phone_number: string, timezone: string, columns: Record<string, string> }

export interface RowIssue { row: number, phone_number: string, reason: string }

/** What an import made of a list: the rows it takes and why it left out the others. */
export interface ImportReport {
  rows: number
  imported: number
  invalid: RowIssue[]
  duplicates: Array<{ row: number, phone_number: string, first_row: number }>
  do_not_call: Array<{ row: number, phone_number: string }>
}

/** The most issues of each kind an answer lists (the counts are whole). */
export const MAX_LISTED_ISSUES = 1000

export const invalidCsv = (message: string) => new HttpError(400, 'invalid_csv', message)
const tooManyRows = (max: number) => new HttpError(413, 'too_many_rows', `a campaign takes at most ${max} contacts (CAMPAIGN_MAX_ROWS)`)

/**
 * Reads a CSV list: a header row naming `phoneColumn` and any other columns (a `timezone` column gives a row's zone),
 * then one row per contact. Refused whole (4xx) when it is not CSV as RFC 4180 reads it, holds NUL characters, lacks
 * the phone column, repeats a column name or has more than `maxRows` rows.
 */
export async function parseContactsCsv (text: string, phoneColumn: string, maxRows: number): Promise<{ contacts: RawContact[], columns: string[], badRows: RowIssue[] }> {
  if (!storable(text)) throw badRequest('the CSV file contains NUL characters or unpaired surrogates', 'invalid_text')
  const contacts: RawContact[] = []
  const badRows: RowIssue[] = []
  let columns: string[] = []
  await new Promise<void>((resolve, reject) => {
    let row = 0
    const stream = parseString(text.replace(/^\uFEFF/, ''), {
      headers: (names) => {
        const headers = names.map((name) => (name ?? '').trim())
        checkHeaders(headers, phoneColumn)
        columns = headers.filter((name) => name !== phoneColumn && name !== 'timezone')
        return headers
      },
      ignoreEmpty: true,
      strictColumnHandling: true
    })
    stream.on('error', (err: Error) => { reject(err instanceof HttpError ? err : invalidCsv(`the CSV file cannot be read: ${err.message}`)) })
    stream.on('data-invalid', (record: Record<string, string> | string[]) => {
      row++
      const phone = Array.isArray(record) ? '' : record[phoneColumn] ?? ''
      badRows.push({ row, phone_number: phone, reason: 'wrong_column_count' })
    })
    stream.on('data', (record: Record<string, string>) => {
      row++
      if (row > maxRows) {
        stream.destroy()
        reject(tooManyRows(maxRows))
        return
      }
      const values: Record<string, string> = {}
      for (const name of columns) values[name] = (record[name] ?? '').trim()
      const timezone = record.timezone?.trim()
      contacts.push({ row, phone_number: (record[phoneColumn] ?? '').trim(), ...(timezone !== undefined && timezone !== '' && { timezone }), columns: values })
    })
    stream.on('end', () => { resolve() })
  })
  if (contacts.length + badRows.length > maxRows) throw tooManyRows(maxRows)
  if (contacts.length + badRows.length === 0) throw invalidCsv('the CSV file has no rows after its header')
  return { contacts, columns, badRows }
}

function checkHeaders (headers: string[], phoneColumn: string): void {
  if (!headers.includes(phoneColumn)) throw invalidCsv(`the CSV file's header has no "${phoneColumn}" column (the phone numbers); its columns: ${headers.slice(0, 20).map((h) => `"${h}"`).join(', ')}`)
  if (headers.length > MAX_COLUMNS + 2) throw invalidCsv(`the CSV file has more than ${MAX_COLUMNS} columns besides the phone number and time zone`)
  const seen = new Set<string>()
  for (const name of headers) {
    if (name === '') throw invalidCsv('a column of the CSV file\'s header has no name')
    if (name.length > MAX_COLUMN_NAME) throw invalidCsv(`the column name "${name.slice(0, 20)}…" is longer than ${MAX_COLUMN_NAME} characters`)
    if (seen.has(name)) throw invalidCsv(`the column "${name}" appears twice in the CSV file's header`)
    seen.add(name)
  }
}

/**
 * Checks each row: the phone number (E.164 once spaces, dashes, dots and parentheses are dropped; `00` counts as `+`),
 * its time zone (the row's `timezone`, else the number's country and area, else `defaultZone`), values within their
 * length, the first row of a number taken and later ones reported as duplicates. Numbers on the account's do-not-call
 * list are left out by the caller (`dropListed`).
 */
export function checkContacts (raw: RawContact[], badRows: RowIssue[], defaultZone: string): { contacts: Contact[], report: ImportReport } {
  const report: ImportReport = { rows: raw.length + badRows.length, imported: 0, invalid: [...badRows], duplicates: [], do_not_call: [] }
  const first = new Map<string, number>()
  const contacts: Contact[] = []
  for (const row of raw) {
    const phone = normalisePhone(row.phone_number)
    const issue = (reason: string) => report.invalid.push({ row: row.row, phone_number: row.phone_number, reason })
    if (phone === undefined) { issue('invalid_phone_number'); continue }
    const zone = row.timezone === undefined ? zoneOfNumber(phone) ?? defaultZone : knownZone(row.timezone)
    if (zone === undefined) { issue('invalid_timezone'); continue }
    if (Object.values(row.columns).some((value) => value.length > MAX_VALUE)) { issue('value_too_long'); continue }
    const seen = first.get(phone)
    if (seen !== undefined) { report.duplicates.push({ row: row.row, phone_number: phone, first_row: seen }); continue }
    first.set(phone, row.row)
    contacts.push({ row: row.row, phone_number: phone, timezone: zone, columns: row.columns })
  }
  report.invalid.sort((a, b) => a.row - b.row)
  return { contacts, report }
}

/** Leaves out the contacts whose numbers are `listed` (the do-not-call list), reporting them. */
export function dropListed (contacts: Contact[], listed: Set<string>, report: ImportReport): Contact[] {
  const kept = contacts.filter((contact) => {
    if (!listed.has(contact.phone_number)) return true
    report.do_not_call.push({ row: contact.row, phone_number: contact.phone_number })
    return false
  })
  report.imported = kept.length
  return kept
}

/** The report as answered: each list cut to MAX_LISTED_ISSUES, with whole counts beside. */
export function reportAnswer (report: ImportReport) {
  const cut = <T>(list: T[]) => list.slice(0, MAX_LISTED_ISSUES)
  return {
    rows: report.rows,
    imported: report.imported,
    invalid_count: report.invalid.length,
    duplicate_count: report.duplicates.length,
    do_not_call_count: report.do_not_call.length,
    invalid: cut(report.invalid),
    duplicates: cut(report.duplicates),
    do_not_call: cut(report.do_not_call)
  }
}
