import t from 'tap'
import { calendarFile, escapeText, fold, utcStamp } from '../../../src/modules/appointments/ics.ts'

// The .ics of an appointment (RFC 5545): text escaped, lines folded at 75 octets without cutting a character,
// CRLF line endings, times in UTC.

t.test('text is escaped as RFC 5545 TEXT: backslash, semicolon, comma, line breaks', async (t) => {
  t.equal(escapeText('a,b;c\\d\r\ne\nf'), 'a\\,b\\;c\\\\d\\ne\\nf')
  t.equal(escapeText('tab\there\u0007'), 'tabhere', 'other control characters are dropped')
})

t.test('a long line is folded at 75 octets, never inside a UTF-8 character, and unfolds to itself', async (t) => {
  for (const line of [`DESCRIPTION:${'x'.repeat(300)}`, `SUMMARY:${'é'.repeat(100)}`, `SUMMARY:${'日本語🙂'.repeat(40)}`]) {
    const folded = fold(line)
    const physical = folded.split('\r\n')
    t.ok(physical.length > 1, 'folded')
    for (const part of physical) {
      t.ok(Buffer.byteLength(part) <= 75, `${Buffer.byteLength(part)} octets`)
      t.equal(Buffer.from(part).toString('utf8'), part, 'whole characters only')
    }
    t.ok(physical.slice(1).every((part) => part.startsWith(' ')), 'continuations start with a space')
    t.equal(folded.replace(/\r\n /g, ''), line, 'unfolding gives the line back')
  }
  t.equal(fold('SHORT:1'), 'SHORT:1')
})

t.test('the file: CRLF endings only, UID, DTSTAMP, DTSTART and DTEND in UTC, METHOD and SEQUENCE', async (t) => {
  const file = calendarFile({
    id: '6a0000000000000000000001',
    method: 'REQUEST',
    sequence: 2,
    start: new Date('2026-10-25T08:30:00Z'),
    end: new Date('2026-10-25T09:00:00Z'),
    stamp: new Date('2026-10-20T12:00:00.123Z'),
    summary: 'Appointment: Lovelace, Ada; guest',
    description: 'Booked by Front desk.\nNotes: first visit',
    organizer: { name: 'Clinic "Main": Street', email: 'noreply@example.com' },
    attendee: { name: 'Ada', email: 'ada@example.com' }
  })
  t.notOk(/[^\r]\n/.test(file), 'no bare LF')
  t.ok(file.endsWith('\r\n'))
  const lines = file.replace(/\r\n /g, '').split('\r\n')
  t.same(lines.slice(0, 5), ['BEGIN:VCALENDAR', 'VERSION:2.0', 'PRODID:-//Switchboard//Appointments//EN', 'CALSCALE:GREGORIAN', 'METHOD:REQUEST'])
  for (const line of ['UID:6a0000000000000000000001@switchboard', 'DTSTAMP:20261020T120000Z', 'DTSTART:20261025T083000Z', 'DTEND:20261025T090000Z',
    'SEQUENCE:2', 'STATUS:CONFIRMED', 'SUMMARY:Appointment: Lovelace\\, Ada\\; guest', 'DESCRIPTION:Booked by Front desk.\\nNotes: first visit',
    'ORGANIZER;CN="Clinic Main: Street":mailto:noreply@example.com', 'ATTENDEE;CN="Ada";ROLE=REQ-PARTICIPANT;PARTSTAT=ACCEPTED:mailto:ada@example.com']) {
    t.ok(lines.includes(line), line)
  }
  t.equal(utcStamp(new Date('2026-11-01T05:59:59.999Z')), '20261101T055959Z')
  const cancel = calendarFile({ id: '6a0000000000000000000001', method: 'CANCEL', sequence: 3, start: new Date(0), end: new Date(60_000), stamp: new Date(0), summary: 's', description: 'd', organizer: { name: 'n', email: 'o@example.com' }, attendee: null })
  t.match(cancel, /METHOD:CANCEL\r\n/)
  t.match(cancel, /STATUS:CANCELLED\r\n/)
  t.notMatch(cancel, /ATTENDEE/)
})
