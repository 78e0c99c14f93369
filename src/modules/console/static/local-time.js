// Times in the viewer's time zone: the server writes each time as UTC text in a <time datetime> element (pages.ts,
// when(): "2026-05-01 09:30 UTC", or to the second); this rewrites that text to the browser's zone at the same
// precision, the UTC text kept as its title. The layout links it on every page with a time; without the script the
// UTC text shows. Only such UTC text is rewritten: a time written in its own zone (an appointment's) stays as it is.
'use strict'
const UTC_TEXT = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2})? UTC$/
const fields = { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', timeZoneName: 'short' }
const toMinute = new Intl.DateTimeFormat('sv-SE', fields)
const toSecond = new Intl.DateTimeFormat('sv-SE', { ...fields, second: '2-digit' })
for (const element of document.querySelectorAll('time[datetime]')) {
  const date = new Date(element.getAttribute('datetime'))
  const text = element.textContent.trim()
  if (Number.isNaN(date.getTime()) || !UTC_TEXT.test(text)) continue
  element.title = text
  element.textContent = (text.length > 20 ? toSecond : toMinute).format(date)
}
