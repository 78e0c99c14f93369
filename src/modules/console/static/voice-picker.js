// The voice picker's Play buttons (console/voice-picker.ts): one <audio> plays the pressed voice's sample; pressing
// the playing voice again stops it. A refused sample (no text-to-speech provider) says why in the status line.
const audio = document.getElementById('voice-preview')
const status = document.getElementById('voice-preview-status')
const buttons = [...document.querySelectorAll('button[data-preview]')]
let current

function reset () {
  if (current !== undefined) current.textContent = 'Play'
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
    button.textContent = 'Stop'
    audio.src = button.dataset.preview
    try {
      await audio.play()
    } catch {
      // The answer was not audio: fetch it again to show its sentence.
      const answer = await fetch(button.dataset.preview).catch(() => undefined)
      status.textContent = answer !== undefined && !answer.ok ? await answer.text() : 'The sample could not be played.'
      reset()
    }
  })
}
audio.addEventListener('ended', reset)
