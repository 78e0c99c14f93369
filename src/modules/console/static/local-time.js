// Times in the viewer's time zone: the server writes each time as UTC in a <time datetime> element (pages.ts,
// when()); this rewrites its text to the browser's zone at the same precision (to the minute or to the second), the
// UTC text kept as its title. The layout links it on every page; without the script the UTC text shows.
'use strict'
const fields = { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', timeZoneName: 'short' }
const toMinute = new Intl.DateTimeFormat('sv-SE', fields)
const toSecond = new Intl.DateTimeFormat('sv-SE', { ...fields, second: '2-digit' })
for (const element of document.querySelectorAll('time[datetime]')) {
  const date = new Date(element.getAttribute('datetime'))
  // A bare day (YYYY-MM-DD) is a calendar day, not an instant: left as it is.
  if (Number.isNaN(date.getTime()) || !element.getAttribute('datetime').includes('T')) continue
  element.title = element.textContent
  element.textContent = (/\d:\d\d:\d\d/.test(element.textContent) ? toSecond : toMinute).format(date)
}
