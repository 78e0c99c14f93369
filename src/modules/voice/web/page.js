/* global location */
// The web-call page: joins the call named by the access token in the address's fragment (never sent to
// the server in a request line or a log), shows the live transcript, and offers typed turns, a keypad (keys
// sent as the caller's keypad presses) and hang-up.
import { WebCall } from './client.js'

const $ = (id) => document.getElementById(id)
const token = new URLSearchParams(location.hash.slice(1)).get('access_token')
const status = (text) => { $('status').textContent = text }

if (token) {
  const call = new WebCall({ accessToken: token })
  // For tests and embedding pages: the call object and what it has done.
  globalThis.switchboardCall = call
  $('start').disabled = false
  status('Ready. Press Start call.')

  $('start').addEventListener('click', async () => {
    $('start').disabled = true
    status('Connecting…')
    try {
      await call.start()
      $('title').textContent = call.info.agent_name
      $('hangup').disabled = false
    } catch (err) {
      status(err.message)
    }
  })
  $('hangup').addEventListener('click', () => call.hangup())
  for (const key of $('keypad').querySelectorAll('button')) key.addEventListener('click', () => call.sendDigits(key.value))
  $('typed').addEventListener('submit', (event) => {
    event.preventDefault()
    const text = $('text').value.trim()
    if (text) call.sendText(text)
    $('text').value = ''
  })

  call.addEventListener('ready', (event) => {
    $('typed').hidden = false
    $('keypad').hidden = false
    status(event.detail.mode === 'voice' ? 'Connected: speak, or type below.' : 'Connected (text: no speech providers are configured). Type below.')
  })
  call.addEventListener('agent_text', (event) => { $('agent-text').textContent += event.detail.delta })
  // A streaming recogniser's words while the caller speaks; the turn's transcript replaces them.
  call.addEventListener('transcript_partial', (event) => { $('user-text').textContent = event.detail.content })
  call.addEventListener('transcript', (event) => {
    const { speaker, content } = event.detail
    $('agent-text').textContent = ''
    if (speaker === 'user') $('user-text').textContent = ''
    const item = document.createElement('li')
    item.className = speaker
    const who = document.createElement('strong')
    who.textContent = speaker === 'user' ? 'You' : speaker === 'agent' ? 'Agent' : 'Tool'
    item.append(who, ' ', content)
    $('transcript').append(item)
  })
  call.addEventListener('agent_speaking', (event) => { document.body.classList.toggle('speaking', event.detail.speaking) })
  call.addEventListener('error', (event) => status(event.detail.message))
  // The agent pressed keys (its send_dtmf tool), as it would on a phone menu.
  call.addEventListener('dtmf', (event) => status(`The agent pressed ${[...event.detail.digits].join(' ')}.`))
  call.addEventListener('ended', (event) => {
    status(`The call ended (${event.detail.reason}).`)
    $('hangup').disabled = true
    $('typed').hidden = true
    $('keypad').hidden = true
  })
}
