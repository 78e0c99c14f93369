// The voice picker's Play buttons (console/voice-picker.ts): one <audio> plays the pressed voice's sample; pressing
// the playing voice again stops it. A refused sample (no text-to-speech provider, a failing one) says why in the
// status line.
const audio = document.getElementById('voice-preview')
const status = document.getElementById('voice-preview-status')
const buttons = [...document.querySelectorAll('button[data-preview]')]
let current

/** The button says what it does; its name names the voice (`Play Alloy`, `Stop Alloy`). */
function label (button, verb) {
  button.textContent = verb
  button.setAttribute('aria-label', `${verb} ${button.dataset.voice}`)
}

function reset () {
  if (current !== undefined) label(current, 'Play')
  current = undefined
}

for (const button of buttons) {
  button.addEventListener('click', async () => {
    const again = current === button
    audio.pause()
    reset()
    status.textContent = ''
    if (again) return
    current = button
    label(button, 'Stop')
    // Asked first with fetch, whose refusal (no text-to-speech provider, a failing one) can be read and shown; the
    // <audio> then plays the same address from the browser's cache (or the server's kept file).
    const answer = await fetch(button.dataset.preview).catch(() => undefined)
    if (current !== button) return
    if (answer === undefined || !answer.ok) {
      status.textContent = answer === undefined ? 'The sample could not be loaded: check the connection.' : await answer.text()
      reset()
      return
    }
    audio.src = button.dataset.preview
    await audio.play().catch(() => {
      status.textContent = 'The sample could not be played.'
      reset()
    })
  })
}
audio.addEventListener('ended', reset)
