// Times in the viewer's time zone: the server writes each time as UTC in a <time datetime> element; this
// rewrites its text to the browser's zone (the UTC text stays as its title). Without the script the UTC text shows.
'use strict'
const format = new Intl.DateTimeFormat('sv-SE', { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' })
for (const element of document.querySelectorAll('time[datetime]')) {
  const date = new Date(element.getAttribute('datetime'))
  // A bare day (YYYY-MM-DD) is a calendar day, not an instant: left as it is.
  if (Number.isNaN(date.getTime()) || !element.getAttribute('datetime').includes('T')) continue
  element.title = element.textContent
  element.textContent = format.format(date)
}
