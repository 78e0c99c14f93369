import t from 'tap'
import { freeSlots, hoursProblem } from '../../../src/modules/capabilities/booking/hours.ts'
import { localOf, spoken, zonedToUtc } from '../../../src/modules/capabilities/booking/time.ts'

// Wall-clock times and opening hours in a time zone, across daylight-saving changes.

t.test('local times become the instants they name, also across daylight-saving changes', async (t) => {
  t.equal(zonedToUtc('2026-12-01T14:00', 'America/New_York').toISOString(), '2026-12-01T19:00:00.000Z')
  t.equal(zonedToUtc('2026-07-01T14:00', 'America/New_York').toISOString(), '2026-07-01T18:00:00.000Z')
  t.equal(zonedToUtc('2026-12-01T14:00', 'Asia/Kolkata').toISOString(), '2026-12-01T08:30:00.000Z')
  // Berlin leaves summer time on 25 October 2026 at 03:00 (02:00–03:00 happens twice: the first is meant).
  t.equal(zonedToUtc('2026-10-25T02:30', 'Europe/Berlin').toISOString(), '2026-10-25T00:30:00.000Z')
  t.equal(zonedToUtc('2026-10-25T09:00', 'Europe/Berlin').toISOString(), '2026-10-25T08:00:00.000Z')
  t.equal(zonedToUtc('2026-10-24T09:00', 'Europe/Berlin').toISOString(), '2026-10-24T07:00:00.000Z')
  // …and enters it on 29 March 2026 at 02:00 (02:30 does not exist: read with the offset before the change).
  t.equal(zonedToUtc('2026-03-29T02:30', 'Europe/Berlin').toISOString(), '2026-03-29T01:30:00.000Z')
  t.equal(localOf(new Date('2026-11-01T13:30:00Z'), 'America/New_York'), '2026-11-01T08:30')
  t.equal(spoken(new Date('2026-12-01T19:00:00Z'), 'America/New_York', 'en-US'), 'Tuesday, December 1 at 2:00 PM')
  t.equal(spoken(new Date('2026-12-01T13:00:00Z'), 'Europe/Berlin', 'de-DE'), 'Dienstag, 1. Dezember um 14:00')
  t.throws(() => zonedToUtc('2026-13-01T10:00', 'UTC'), RangeError)
  t.throws(() => zonedToUtc('tomorrow', 'UTC'), RangeError)
})

t.test('free slots keep to the opening hours in local time on both sides of a daylight-saving change', async (t) => {
  const hours = { fri: [{ from: '09:00', to: '10:00' }], mon: [{ from: '09:00', to: '10:00' }] }
  // New York leaves summer time on Sunday 1 November 2026: Friday's 09:00 is 13:00Z, Monday's 14:00Z.
  const slots = freeSlots({ from: new Date('2026-10-30T00:00:00Z'), to: new Date('2026-11-03T00:00:00Z'), hours, timeZone: 'America/New_York', slotMinutes: 30, bufferMinutes: 0, busy: [], notBefore: new Date(0) })
  t.same(slots.map((s) => s.start.toISOString()), ['2026-10-30T13:00:00.000Z', '2026-10-30T13:30:00.000Z', '2026-11-02T14:00:00.000Z', '2026-11-02T14:30:00.000Z'])
})

t.test('busy times with their buffer, the earliest start and the search window leave slots out', async (t) => {
  const hours = { tue: [{ from: '09:00', to: '12:00' }] }
  const base = { from: new Date('2026-12-01T00:00:00Z'), to: new Date('2026-12-02T00:00:00Z'), hours, timeZone: 'UTC', slotMinutes: 60 }
  const busy = [{ start: new Date('2026-12-01T10:00:00Z'), end: new Date('2026-12-01T10:30:00Z') }]
  t.same(freeSlots({ ...base, bufferMinutes: 0, busy, notBefore: new Date(0) }).map((s) => localOf(s.start, 'UTC')), ['2026-12-01T09:00', '2026-12-01T11:00'])
  t.same(freeSlots({ ...base, bufferMinutes: 15, busy, notBefore: new Date(0) }).map((s) => localOf(s.start, 'UTC')), ['2026-12-01T11:00'], 'a 15-minute buffer reaches into the hour before (09:45), not the one after (10:45)')
  t.same(freeSlots({ ...base, bufferMinutes: 0, busy: [], notBefore: new Date('2026-12-01T09:30:00Z') }).map((s) => localOf(s.start, 'UTC')), ['2026-12-01T10:00', '2026-12-01T11:00'])
  t.same(freeSlots({ ...base, bufferMinutes: 0, busy: [], notBefore: new Date(0), notAfter: new Date('2026-12-01T11:00:00Z') }).map((s) => localOf(s.start, 'UTC')), ['2026-12-01T09:00', '2026-12-01T10:00'])
})

t.test('opening hours that end before they start or overlap are named', async (t) => {
  t.equal(hoursProblem({ mon: [{ from: '12:00', to: '09:00' }] }), 'opening_hours.mon: 12:00–09:00 ends before it starts')
  t.equal(hoursProblem({ tue: [{ from: '13:00', to: '17:00' }, { from: '09:00', to: '13:30' }] }), 'opening_hours.tue: 09:00–13:30 and 13:00–17:00 overlap')
  t.equal(hoursProblem({ wed: [{ from: '09:00', to: '12:00' }, { from: '12:00', to: '24:00' }] }), undefined)
})
