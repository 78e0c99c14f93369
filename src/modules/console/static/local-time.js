// Times in the viewer's time zone: the server writes each time as UTC text in a <time datetime> element (pages.ts,
// when(): "2026-05-01 09:30 UTC", or to the second); this rewrites that text to the browser's zone at the same
// precision, the UTC text kept as its title. The layout links it on every page with a time; without the script the
// UTC text shows. Only such UTC text is rewritten: a time written in its own zone (an appointment's) stays as it is.
// An <option> cannot hold a <time>: one with data-datetime has the UTC text inside its words rewritten the same way.
'use strict'
const UTC_TEXT = /\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2})? UTC/
const fields = { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', timeZoneName: 'short' }
const toMinute = new Intl.DateTimeFormat('sv-SE', fields)
const toSecond = new Intl.DateTimeFormat('sv-SE', { ...fields, second: '2-digit' })
const local = (utcText, date) => (utcText.length > 20 ? toSecond : toMinute).format(date)
for (const element of document.querySelectorAll('time[datetime], option[data-datetime]')) {
  const isTime = element.localName === 'time'
  const date = new Date(element.getAttribute(isTime ? 'datetime' : 'data-datetime'))
  const text = element.textContent.trim()
  const found = UTC_TEXT.exec(text)
  if (Number.isNaN(date.getTime()) || found === null || (isTime && found[0] !== text)) continue
  if (isTime) element.title = text
  element.textContent = text.replace(found[0], local(found[0], date))
}
