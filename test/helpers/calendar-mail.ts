import type { ReceivedMail } from './smtp.ts'

// What a received e-mail carries as an iCalendar attachment, read from its raw MIME text as a mail client would.

export interface CalendarPart {
  /** The part's Content-Type header (text/calendar; method=…). */
  contentType: string
  /** The file as sent: CRLF line endings, folded lines. */
  raw: string
  /** Its properties after unfolding, by name (parameters dropped from the key): the first VEVENT's and the calendar's. */
  props: Record<string, string>
  /** Its unfolded lines, parameters included (ORGANIZER;CN=…:mailto:…). */
  lines: string[]
}

function decode (body: string, encoding: string): string {
  if (encoding === 'base64') return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8')
  if (encoding === 'quoted-printable') {
    const bytes = body.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))
    return Buffer.from(bytes, 'latin1').toString('utf8')
  }
  return body
}

/** The text/calendar attachment of a received e-mail; throws when it has none. */
export function calendarPart (mail: ReceivedMail): CalendarPart {
  const boundary = /boundary="?([^";\r\n]+)"?/i.exec(mail.raw)?.[1]
  if (boundary === undefined) throw new Error('not a multipart e-mail')
  const parts = mail.raw.split(`--${boundary}`).slice(1, -1)
  for (const part of parts) {
    const [head, ...rest] = part.replace(/^\r\n/, '').split('\r\n\r\n')
    const headers = head.replace(/\r\n[ \t]+/g, ' ')
    const contentType = /^content-type:\s*(.+)$/im.exec(headers)?.[1] ?? ''
    if (!contentType.toLowerCase().startsWith('text/calendar')) continue
    const encoding = (/^content-transfer-encoding:\s*(\S+)/im.exec(headers)?.[1] ?? '7bit').toLowerCase()
    const raw = decode(rest.join('\r\n\r\n').replace(/\r\n$/, ''), encoding)
    const lines = raw.replace(/\r\n /g, '').split('\r\n').filter((line) => line !== '')
    const props: Record<string, string> = {}
    for (const line of lines) {
      const colon = line.search(/:(?=(?:[^"]*"[^"]*")*[^"]*$)/)
      const name = line.slice(0, colon).split(';')[0]
      props[name] ??= line.slice(colon + 1)
    }
    return { contentType, raw, props, lines }
  }
  throw new Error('no text/calendar part')
}

/** The decoded text/plain body of a received e-mail (quoted-printable or base64 undone). */
export function textPart (mail: ReceivedMail): string {
  const boundary = /boundary="?([^";\r\n]+)"?/i.exec(mail.raw)?.[1]
  const parts = boundary === undefined ? [mail.raw] : mail.raw.split(`--${boundary}`).slice(1, -1)
  for (const part of parts) {
    const [head, ...rest] = part.replace(/^\r\n/, '').split('\r\n\r\n')
    const headers = head.replace(/\r\n[ \t]+/g, ' ')
    if (boundary !== undefined && !/^content-type:\s*text\/plain/im.test(headers)) continue
    return decode(rest.join('\r\n\r\n'), (/^content-transfer-encoding:\s*(\S+)/im.exec(headers)?.[1] ?? '7bit').toLowerCase())
  }
  return ''
}
