/* global CSSStyleSheet, location */
// The Switchboard website widget (docs/widget.md): a call button on any site, from one tag:
//
//   <script src="https://your-switchboard/widget.js" data-agent-id="…" data-widget-key="wk_…" defer></script>
//   <script src="https://your-switchboard/widget.js" data-agent-id="…" data-token-url="/switchboard-token" defer></script>
//
// With data-token-url the widget POSTs { agent_id } to the site's own endpoint, which answers { access_token } from
// POST /v1/call/make-web-call (the API key stays on the site's server). With data-widget-key it starts the call with
// the agent's public widget key. The call itself is the web-call client (/web-call/client.js), the same the
// /web-call page uses. Plain JavaScript, no dependencies; everything it draws lives in a shadow root, so neither the
// page's styles reach it nor its styles the page.
(() => {
  const script = document.currentScript
  if (script === null) return
  const base = new URL(script.src).origin
  const { agentId, widgetKey, tokenUrl, preview } = script.dataset
  const warn = (message) => console.error(`Switchboard widget: ${message}`)
  if (!agentId) return warn('data-agent-id is missing')
  if (preview === undefined && !widgetKey && !tokenUrl) return warn('give data-widget-key or data-token-url (docs/widget.md)')

  const CSS = `
:host { all: initial; }
.root { font: 15px/1.4 system-ui, sans-serif; --fg: #111827; --bg: #ffffff; --muted: #4b5563; --line: #d1d5db; display: flex; flex-direction: column; gap: 10px; color: var(--fg); }
.root[data-theme="dark"] { --fg: #f9fafb; --bg: #111827; --muted: #d1d5db; --line: #374151; }
:host([data-position="bottom-right"]) .root { align-items: flex-end; }
:host([data-position="bottom-left"]) .root { align-items: flex-start; }
button { font: inherit; cursor: pointer; border-radius: 999px; border: 0; padding: 10px 16px; }
button:focus-visible, input:focus-visible { outline: 3px solid var(--fg); outline-offset: 2px; }
.launcher { display: inline-flex; align-items: center; gap: 8px; background: var(--primary); color: var(--on-primary); box-shadow: 0 4px 14px rgb(0 0 0 / 25%); max-width: 320px; text-align: left; }
.launcher svg { width: 20px; height: 20px; flex: none; fill: currentColor; }
.panel { width: 300px; max-width: calc(100vw - 40px); background: var(--bg); border: 1px solid var(--line); border-radius: 12px; padding: 14px; box-shadow: 0 8px 24px rgb(0 0 0 / 20%); display: flex; flex-direction: column; gap: 10px; }
.panel[hidden], .typed[hidden], .launcher[hidden] { display: none; }
.title { margin: 0; font-weight: 600; }
.status { margin: 0; color: var(--muted); }
.status::before { content: ""; display: inline-block; width: 8px; height: 8px; border-radius: 50%; margin-right: 6px; background: var(--line); }
.root[data-state="listening"] .status::before { background: #16a34a; }
.root[data-state="speaking"] .status::before { background: var(--primary); }
.root[data-state="error"] .status::before { background: #dc2626; }
.transcript { list-style: none; margin: 0; padding: 0; max-height: 180px; overflow-y: auto; display: flex; flex-direction: column; gap: 6px; }
.transcript li { padding: 6px 10px; border-radius: 10px; border: 1px solid var(--line); }
.transcript li.user { align-self: flex-end; }
.typed { display: flex; gap: 6px; }
.typed input { flex: 1; min-width: 0; font: inherit; padding: 8px; border-radius: 8px; border: 1px solid var(--line); background: var(--bg); color: var(--fg); }
.typed button, .end { background: var(--primary); color: var(--on-primary); }
.end { align-self: stretch; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
`
  const PHONE = '<svg viewBox="0 0 24 24" aria-hidden="true"><path d="M6.6 10.8a15.1 15.1 0 0 0 6.6 6.6l2.2-2.2a1 1 0 0 1 1-.25 11.4 11.4 0 0 0 3.6.57 1 1 0 0 1 1 1V20a1 1 0 0 1-1 1A17 17 0 0 1 3 4a1 1 0 0 1 1-1h3.5a1 1 0 0 1 1 1c0 1.25.2 2.45.57 3.57a1 1 0 0 1-.25 1z"/></svg>'

  /** Black or white, whichever reads better on the button's colour. */
  function onColour (hex) {
    const [r, g, b] = [1, 3, 5].map((i) => {
      const c = parseInt(hex.slice(i, i + 2), 16) / 255
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4
    })
    const luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return (luminance + 0.05) / 0.05 > 1.05 / (luminance + 0.05) ? '#111827' : '#ffffff'
  }

  async function look () {
    if (preview !== undefined) return JSON.parse(preview)
    const answer = await fetch(`${base}/v1/widget/${encodeURIComponent(agentId)}`)
    const body = await answer.json()
    if (!answer.ok) throw new Error(body.message)
    if (widgetKey && !body.allowed_origins_set) throw new Error('the agent lists no allowed_origins, so its widget key works on no site (a public key usable from any site would be an open door): add this site\'s origin to its widget_settings.allowed_origins')
    return body
  }

  /** The call's access token (and, with a key, what joining answers), from the site's endpoint or the key route. */
  async function authorize () {
    let answer
    try {
      answer = widgetKey
        ? await fetch(`${base}/v1/widget/${encodeURIComponent(agentId)}/call`, { method: 'POST', headers: { 'x-widget-key': widgetKey } })
        : await fetch(new URL(tokenUrl, location.href), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ agent_id: agentId }) })
    } catch {
      // A refused preflight looks like a network failure to the page.
      throw new Error(widgetKey ? 'This site may not start calls with this agent.' : 'The call could not be started.')
    }
    const body = await answer.json().catch(() => ({}))
    if (!answer.ok || typeof body.access_token !== 'string') throw new Error(body.message || `The call could not be started (${answer.status}).`)
    return widgetKey ? { accessToken: body.access_token, joined: body } : { accessToken: body.access_token }
  }

  function render (settings) {
    if (document.querySelector(`switchboard-widget[data-agent-id="${CSS_ESCAPE(agentId)}"]`) !== null) return
    const host = document.createElement('switchboard-widget')
    host.dataset.agentId = agentId
    host.dataset.position = settings.position === 'bottom-left' ? 'bottom-left' : 'bottom-right'
    // Inline and important: a rule of the page that matches the element (`* { position: relative }`) cannot move it.
    const place = { position: 'fixed', bottom: '20px', [host.dataset.position === 'bottom-left' ? 'left' : 'right']: '20px', 'z-index': '2147483000' }
    for (const [property, value] of Object.entries(place)) host.style.setProperty(property, value, 'important')
    const root = host.attachShadow({ mode: 'open' })
    // A constructed sheet: a page's Content-Security-Policy without 'unsafe-inline' styles still lets it apply.
    if ('adoptedStyleSheets' in root) {
      const sheet = new CSSStyleSheet()
      sheet.replaceSync(CSS)
      root.adoptedStyleSheets = [sheet]
    } else {
      root.append(Object.assign(document.createElement('style'), { textContent: CSS }))
    }
    const name = settings.agent_name || 'us'
    const label = settings.greeting || `Call ${name}`
    const box = document.createElement('div')
    box.className = 'root'
    box.dataset.theme = settings.theme === 'dark' ? 'dark' : 'light'
    box.dataset.state = 'idle'
    const primary = /^#[0-9a-f]{6}$/i.test(settings.primary_color) ? settings.primary_color : '#2563eb'
    box.style.setProperty('--primary', primary)
    box.style.setProperty('--on-primary', onColour(primary))
    box.innerHTML = `
<section class="panel" id="panel" hidden>
  <p class="title"></p>
  <p class="status" role="status" aria-live="polite"></p>
  <ol class="transcript" aria-label="Transcript"></ol>
  <form class="typed" hidden><label class="visually-hidden" for="text">Your message</label><input id="text" autocomplete="off" maxlength="2000"><button type="submit">Send</button></form>
  <button class="end" type="button">End call</button>
</section>
<button class="launcher" type="button" aria-controls="panel" aria-expanded="false">${PHONE}<span class="greeting"></span></button>`
    const $ = (selector) => box.querySelector(selector)
    $('.title').textContent = settings.agent_name || ''
    $('.greeting').textContent = label
    $('.launcher').setAttribute('aria-label', `${label}: start a call with ${name}`)
    root.append(box)
    document.body.append(host)

    let call
    // Each press of the button is an attempt; closing the panel while one connects abandons it.
    let attempt = 0
    const state = (value, text) => {
      box.dataset.state = value
      $('.status').textContent = text
    }
    const line = (speaker, content) => {
      const item = document.createElement('li')
      item.className = speaker
      const who = document.createElement('span')
      who.className = 'visually-hidden'
      who.textContent = speaker === 'user' ? 'You: ' : `${name}: `
      item.append(who, content)
      $('.transcript').append(item)
      item.scrollIntoView({ block: 'nearest' })
    }
    const open = () => {
      $('.panel').hidden = false
      $('.launcher').hidden = true
      $('.launcher').setAttribute('aria-expanded', 'true')
      $('.transcript').replaceChildren()
      $('.end').textContent = 'End call'
      $('.end').focus()
    }
    const close = () => {
      attempt++
      $('.panel').hidden = true
      $('.typed').hidden = true
      $('.launcher').hidden = false
      $('.launcher').setAttribute('aria-expanded', 'false')
      box.dataset.state = 'idle'
      $('.launcher').focus()
    }
    const finished = () => {
      $('.typed').hidden = true
      $('.end').textContent = 'Close'
      call = undefined
    }

    $('.launcher').addEventListener('click', async () => {
      open()
      if (preview !== undefined) return state('ended', 'Preview: calls start on your site.')
      state('connecting', 'Connecting…')
      const mine = ++attempt
      try {
        const { accessToken, joined } = await authorize()
        const { WebCall } = await import(`${base}/web-call/client.js`)
        if (mine !== attempt) return
        call = new WebCall({ accessToken, baseUrl: base, joined })
        call.addEventListener('ready', (event) => {
          const typed = event.detail.mode !== 'voice'
          $('.typed').hidden = !typed
          state('listening', typed ? 'Connected: type your message.' : 'Listening: speak now.')
        })
        call.addEventListener('agent_speaking', (event) => {
          if (box.dataset.state === 'listening' || box.dataset.state === 'speaking') {
            state(event.detail.speaking ? 'speaking' : 'listening', event.detail.speaking ? `${name} is speaking.` : (call?.mode === 'voice' ? 'Listening: speak now.' : 'Connected: type your message.'))
          }
        })
        call.addEventListener('transcript', (event) => line(event.detail.speaker, event.detail.content))
        call.addEventListener('error', (event) => state('error', event.detail.code === 'microphone' ? 'The microphone could not be used: allow it for this site and try again.' : event.detail.message))
        call.addEventListener('ended', () => {
          if (box.dataset.state !== 'error') state('ended', 'The call ended.')
          finished()
        })
        await call.start()
        if (mine !== attempt) call.hangup()
      } catch (err) {
        if (mine !== attempt) return
        state('error', err.message)
        warn(err.message)
        call?.hangup()
        finished()
      }
    })
    $('.end').addEventListener('click', () => {
      if (call === undefined) return close()
      state('ended', 'Ending the call…')
      call.hangup()
    })
    $('.typed').addEventListener('submit', (event) => {
      event.preventDefault()
      const text = $('#text').value.trim()
      if (text) call?.sendText(text)
      $('#text').value = ''
    })
  }

  const CSS_ESCAPE = (value) => value.replace(/["\\]/g, '\\$&')

  const ready = (run) => document.readyState === 'loading' ? document.addEventListener('DOMContentLoaded', run, { once: true }) : run()
  look().then((settings) => ready(() => render(settings)), (err) => warn(err.message))
})()
