/* global addEventListener */
// A form marked data-dirty-warning asks before the page is left with changes that were not sent: any input or change
// marks it changed, sending it (Save, Add a field) does not ask.
for (const form of document.querySelectorAll('form[data-dirty-warning]')) {
  let changed = false
  form.addEventListener('input', () => { changed = true })
  form.addEventListener('change', () => { changed = true })
  form.addEventListener('submit', () => { changed = false })
  addEventListener('beforeunload', (event) => {
    if (!changed) return
    event.preventDefault()
    // Older browsers show the dialog only when returnValue is set.
    event.returnValue = ''
  })
}
