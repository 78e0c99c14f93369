// The Test button of an api_call action (console/agent-capabilities.ts): sends the test without leaving the page and
// shows its result right under the button, where the person is looking. The result is the server's escaped HTML.
const form = document.querySelector('form[data-test-action]')
const box = document.getElementById('test-result')
if (form !== null && box !== null) {
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    const button = form.querySelector('button')
    button.disabled = true
    box.textContent = 'Sending the test request…'
    try {
      const res = await fetch(form.action, { method: 'POST', body: new URLSearchParams(new FormData(form)), headers: { 'x-console-fragment': 'test' }, credentials: 'same-origin' })
      if (res.ok) box.innerHTML = await res.text()
      else box.textContent = res.status === 403 ? 'Refused: reload the page and try again.' : `The test could not be sent (status ${res.status}). Reload the page and try again.`
    } catch {
      box.textContent = 'The test could not be sent: the console did not answer. Try again in a moment.'
    } finally {
      button.disabled = false
      box.focus()
    }
  })
}
