/* global requestAnimationFrame */
// A web call's controls, built inside one element: Start (and, where the page can get a new token, "Call again"),
// mute and a microphone level meter while the microphone is open, Hang up, a keypad, who is speaking, the live
// transcript and typed turns (shown only once the call is connected). Used by the /web-call page and by the
// console's "Talk to this agent" on the agent's page.
import { WebCall } from './client.js'

// How a call ended, in the words of the person who held it (the reasons: docs/voice.md, "How a call closes").
const ENDINGS = {
  user_hangup: 'you hung up',
  agent_hangup: 'the agent hung up',
  inactivity: 'nobody spoke for a while',
  max_duration_reached: 'it reached its time limit',
  voicemail: 'an answering machine answered',
  fax_detected: 'a fax machine answered',
  server_shutdown: 'the server is restarting; try again in a moment',
  runtime_error: 'something went wrong on the server',
  protocol_error: 'this page sent something the server did not understand',
  stream_timeout: 'the connection went quiet',
  stream_dropped: 'the connection was lost'
}

/** "The call ended: you hung up." */
// The server's refusals of a typed turn (transports/browser.ts), in words.
const TYPED_REFUSALS = {
  turn_in_progress: 'The agent is still answering: send this once it has finished speaking.',
  text_too_long: 'That is too long to send at once: shorten it.'
}

export function endingInWords (reason) {
  return `The call ended: ${ENDINGS[reason] ?? `the connection closed (${reason})`}.`
}

const KEYS = ['1', '2', '3', '4', '5', '6', '7', '8', '9', '*', '0', '#']

function element (tag, attributes = {}, ...children) {
  const node = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) {
    if (value === true) node.setAttribute(name, '')
    else if (value !== false) node.setAttribute(name, value)
  }
  node.append(...children)
  return node
}

/**
 * Builds the call's controls in `root` and runs calls from them.
 * - `token()`: answers `{ accessToken, callId? }` when Start is pressed (throws an Error whose message is shown).
 * - `prefix`: put before every id (a page that has other fields, such as the console's agent page).
 * - `again`: after the end, Start becomes "Call again" (each press asks `token()` for a new call).
 * - `callPage(callId)`: the address of the finished call's page, linked as "View this call".
 * - `onJoined(call)`: when the call is connected (the page may show the agent's name).
 */
export function mountCall (root, { token, prefix = '', startLabel = 'Start call', again = false, callPage, onJoined, ready = 'Ready. Press Start call.' }) {
  const id = (name) => `${prefix}${name}`
  const start = element('button', { id: id('start'), type: 'button' }, startLabel)
  const mute = element('button', { id: id('mute'), type: 'button', 'aria-pressed': 'false', hidden: true }, 'Mute')
  const hangup = element('button', { id: id('hangup'), class: 'hangup', type: 'button', hidden: true }, 'Hang up')
  const status = element('p', { id: id('status'), role: 'status', 'aria-live': 'polite' }, ready)
  const state = element('p', { id: id('state'), class: 'call-state', 'data-state': 'idle' })
  const level = element('meter', { id: id('level'), min: '0', max: '1', value: '0' })
  const microphone = element('p', { class: 'microphone', hidden: true }, element('label', { for: id('level') }, 'Microphone'), ' ', level)
  // Last, under the typed turns: most calls need no keys.
  const keypad = element('div', { id: id('keypad'), class: 'keypad', role: 'group', 'aria-label': 'Keypad', hidden: true },
    ...KEYS.map((key) => element('button', { type: 'button', value: key }, key)))
  const transcript = element('ol', { id: id('transcript'), class: 'call-transcript', 'aria-label': 'Transcript', 'aria-live': 'polite' })
  const userText = element('p', { id: id('user-text'), class: 'partial', 'aria-hidden': 'true' })
  const agentText = element('p', { id: id('agent-text'), class: 'partial', 'aria-hidden': 'true' })
  const text = element('input', { id: id('text'), name: 'text', autocomplete: 'off', maxlength: '2000', required: true })
  const typed = element('form', { id: id('typed'), class: 'typed', hidden: true },
    element('label', { for: id('text') }, 'Say something'), text, element('button', { type: 'submit' }, 'Send'))
  const after = element('p', { id: id('after'), class: 'after', hidden: true })
  root.append(element('div', { class: 'controls' }, start, mute, hangup), status, after, element('div', { class: 'live' }, state, microphone), transcript, userText, agentText, typed, keypad)

  let call
  // Typed turns sent and not yet answered, oldest first. The server answers each in order, with its transcript
  // (taken) or an error (refused: TYPED_REFUSALS); a refused one goes back into the field, so nothing typed is lost.
  const pending = []
  const say = (words) => { status.textContent = words }
  const show = (who) => {
    state.dataset.state = who
    state.textContent = { agent: 'The agent is speaking', user: 'You are speaking', listening: 'The agent is listening', idle: '' }[who]
  }
  const live = (on) => {
    hangup.hidden = !on
    typed.hidden = !on
    keypad.hidden = !on
  }

  const meter = () => {
    if (call?.state !== 'connected' || microphone.hidden) return
    level.value = call.level()
    requestAnimationFrame(meter)
  }

  function watch (call, callId) {
    call.addEventListener('ready', (event) => {
      live(true)
      show('listening')
      if (event.detail.mode === 'voice') {
        say('Connected: speak, or type below.')
      } else {
        say('Connected (text: no speech providers are configured). Type below.')
      }
    })
    call.addEventListener('agent_text', (event) => { agentText.textContent += event.detail.delta })
    // A streaming recogniser's words while the caller speaks; the turn's transcript replaces them.
    call.addEventListener('transcript_partial', (event) => { userText.textContent = event.detail.content })
    call.addEventListener('transcript', (event) => {
      const { speaker, content } = event.detail
      agentText.textContent = ''
      if (speaker === 'user') {
        userText.textContent = ''
        if (pending[0] === content) pending.shift()
      }
      const who = element('strong', {}, speaker === 'user' ? 'You' : speaker === 'agent' ? 'Agent' : 'Tool')
      transcript.append(element('li', { class: speaker }, who, ' ', content))
    })
    call.addEventListener('agent_speaking', (event) => show(event.detail.speaking ? 'agent' : 'listening'))
    call.addEventListener('user_speaking', (event) => { if (state.dataset.state !== 'agent' || event.detail.speaking) show(event.detail.speaking ? 'user' : 'listening') })
    call.addEventListener('error', (event) => {
      const { code, message } = event.detail
      say(TYPED_REFUSALS[code] ?? message)
      const words = code in TYPED_REFUSALS ? pending.shift() : undefined
      if (words !== undefined) text.value = text.value === '' ? words : `${words} ${text.value}`
    })
    // The agent pressed keys (its send_dtmf tool), as it would on a phone menu.
    call.addEventListener('dtmf', (event) => say(`The agent pressed ${[...event.detail.digits].join(' ')}.`))
    call.addEventListener('ended', (event) => {
      say(endingInWords(event.detail.reason))
      show('idle')
      live(false)
      mute.hidden = true
      microphone.hidden = true
      const link = callId !== undefined && callPage?.(callId)
      after.replaceChildren(...(link ? [element('a', { href: link }, 'View this call')] : []))
      after.hidden = !link
      if (again) {
        start.textContent = 'Call again'
        start.hidden = false
      }
    })
    // The microphone opens after `ready` in a spoken call: then the meter and the mute button are useful.
    call.addEventListener('microphone', () => {
      mute.hidden = false
      microphone.hidden = false
      meter()
    })
  }

  start.addEventListener('click', async () => {
    start.hidden = true
    after.hidden = true
    transcript.replaceChildren()
    say('Connecting…')
    try {
      const { accessToken, callId, joined } = await token()
      call = new WebCall({ accessToken, joined })
      // For tests and embedding pages: the call object and what it has done.
      globalThis.switchboardCall = call
      watch(call, callId)
      await call.start()
      onJoined?.(call)
    } catch (err) {
      say(err.message)
      live(false)
      start.hidden = !again
    }
  })
  mute.addEventListener('click', () => {
    call.setMuted(!call.muted)
    mute.setAttribute('aria-pressed', String(call.muted))
    mute.textContent = call.muted ? 'Unmute' : 'Mute'
  })
  hangup.addEventListener('click', () => call.hangup())
  for (const key of keypad.querySelectorAll('button')) key.addEventListener('click', () => call.sendDigits(key.value))
  typed.addEventListener('submit', (event) => {
    event.preventDefault()
    const words = text.value.trim()
    if (words === '' || !call.sendText(words)) return
    pending.push(words)
    text.value = ''
  })
  return { start }
}
