// An appointment as an iCalendar file (RFC 5545) in an iTIP message (RFC 5546): METHOD:REQUEST adds or updates the
// event in the recipient's calendar, METHOD:CANCEL removes it. The UID stays the appointment's and SEQUENCE grows at
// every change, so that a calendar applies a move or a cancellation to the event it already holds.

export interface CalendarEvent {
  /** The appointment's id: the event's UID is `<id>@switchboard`. */
  id: string
  method: 'REQUEST' | 'CANCEL'
  sequence: number
  start: Date
  end: Date
  /** When this version was made (DTSTAMP). */
  stamp: Date
  summary: string
  description: string
  organizer: { name: string, email: string }
  attendee: { name: string, email: string } | null
}

const CRLF = '\r\n'
/** RFC 5545 3.1: a content line is at most 75 octets, the rest continued on lines that start with one space. */
const MAX_OCTETS = 75

/** 20261025T083000Z: a date-time in UTC (RFC 5545 3.3.5, form 2). */
export const utcStamp = (date: Date) => date.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '')

/** TEXT (RFC 5545 3.3.11): backslash, semicolon and comma escaped, line breaks as \n; other controls dropped. */
export const escapeText = (text: string) =>
  text.replace(/\r\n?/g, '\n').replace(/[\\;,]/g, (c) => `\\${c}`).replace(/\n/g, '\\n').replace(/\p{Cc}/gu, '')

/** A parameter value (CN): quoted, since a name may hold ":", ";" or ","; a double quote cannot be in one at all. */
const paramValue = (text: string) => `"${text.replace(/["\p{Cc}]/gu, '')}"`

/** One content line folded at 75 octets without cutting a UTF-8 character in two. */
export function fold (line: string): string {
  const parts: string[] = []
  let part = ''
  let octets = 0
  for (const char of line) {
    const size = Buffer.byteLength(char)
    // Continuation lines start with a space, which counts towards their 75 octets.
    if (octets + size > MAX_OCTETS) {
      parts.push(part)
      part = ' '
      octets = 1
    }
    part += char
    octets += size
  }
  parts.push(part)
  return parts.join(CRLF)
}

/** The whole file: CRLF line endings, every line folded. */
export function calendarFile (event: CalendarEvent): string {
  const lines = [
    'BEGIN:VCALENDAR',
    'VERSION:2.0',
    'PRODID:-//Switchboard//Appointments//EN',
    'CALSCALE:GREGORIAN',
    `METHOD:${event.method}`,
    'BEGIN:VEVENT',
    `UID:${event.id}@switchboard`,
    `DTSTAMP:${utcStamp(event.stamp)}`,
    `DTSTART:${utcStamp(event.start)}`,
    `DTEND:${utcStamp(event.end)}`,
    `SEQUENCE:${event.sequence}`,
    `STATUS:${event.method === 'CANCEL' ? 'CANCELLED' : 'CONFIRMED'}`,
    `SUMMARY:${escapeText(event.summary)}`,
    `DESCRIPTION:${escapeText(event.description)}`,
    `ORGANIZER;CN=${paramValue(event.organizer.name)}:mailto:${event.organizer.email}`,
    ...event.attendee === null ? [] : [`ATTENDEE;CN=${paramValue(event.attendee.name)};ROLE=REQ-PARTICIPANT;PARTSTAT=ACCEPTED:mailto:${event.attendee.email}`],
    'TRANSP:OPAQUE',
    'END:VEVENT',
    'END:VCALENDAR'
  ]
  return lines.map(fold).join(CRLF) + CRLF
}
