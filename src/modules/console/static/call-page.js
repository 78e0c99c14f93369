// The call page's recording and transcript (console/calls.ts): each line's time becomes a button that plays the
// recording from that line (a click anywhere on the line does the same), and the line being heard is marked as the
// recording plays. Without the script the times stay text and the player works on its own.
'use strict'
const audio = document.getElementById('recording')
const lines = [...document.querySelectorAll('.transcript li[data-at]')]
if (audio !== null && lines.length > 0) {
  const playFrom = (line) => {
    audio.currentTime = Number(line.dataset.at)
    audio.play().catch(() => {})
  }
  for (const line of lines) {
    const at = line.querySelector('.at')
    const button = document.createElement('button')
    button.type = 'button'
    button.className = 'at link'
    button.textContent = at.textContent
    button.setAttribute('aria-label', `Play from ${at.textContent}`)
    at.replaceWith(button)
    // The button for the keyboard; the whole line for the mouse (text selected by dragging is not a click to seek).
    line.addEventListener('click', (event) => {
      if (event.target.closest('a, button') !== null && event.target !== button) return
      if (event.target !== button && String(window.getSelection()) !== '') return
      playFrom(line)
    })
  }
  // The line heard: the last one that starts at or before the playing position.
  let marked
  const mark = () => {
    const now = audio.currentTime + 0.05
    let heard
    for (const line of lines) if (Number(line.dataset.at) <= now) heard = line
    if (heard === marked) return
    marked?.classList.remove('playing')
    marked?.removeAttribute('aria-current')
    heard?.classList.add('playing')
    heard?.setAttribute('aria-current', 'true')
    marked = heard
  }
  audio.addEventListener('timeupdate', mark)
  audio.addEventListener('seeked', mark)
}
