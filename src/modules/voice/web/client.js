/* global AudioContext, AudioWorkletNode */
// The Switchboard web-call client: joins a web call with the access token that make-web-call answered,
// sends the microphone as 16 kHz PCM16 and plays the agent, over one WebSocket (docs/voice.md). No
// dependencies; an ES module for current browsers.
//
//   import { WebCall } from 'https://your-switchboard/web-call/client.js'
//   const call = new WebCall({ accessToken })
//   call.addEventListener('transcript', (e) => console.log(e.detail.speaker, e.detail.content))
//   await call.start()          // asks for the microphone when the call is spoken
//   call.sendText('Hello')      // a typed turn (always possible; the only way in text mode)
//   call.setMuted(true)         // the microphone sends silence until unmuted
//   call.level()                // the microphone's loudness now, 0 to 1 (for a level meter)
//   call.hangup()
//
// `joined`: what joining answered already (the website widget's key route answers it with the token), so that
// start() skips POST /web-call/join.
//
// Events (each an Event with `detail`): ready, transcript, transcript_partial, agent_text, agent_speaking,
// user_speaking, played, microphone (it is open: level() and setMuted() apply), ended, error.

export class WebCall extends EventTarget {
  constructor ({ accessToken, baseUrl = globalThis.location?.origin, microphone = true, joined } = {}) {
    super()
    if (!accessToken) throw new Error('WebCall needs the accessToken from make-web-call')
    this.accessToken = accessToken
    this.baseUrl = String(baseUrl).replace(/\/+$/, '')
    this.microphone = microphone
    this.state = 'idle'
    this.info = joined
    this.playedSeconds = 0
    this.muted = false
  }

  emit (type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }))
  }

  /** Joins the call, opens its stream and starts playback (call it from a click: browsers want a gesture for audio). */
  async start () {
    if (this.state !== 'idle') throw new Error(`the call is ${this.state}`)
    this.state = 'connecting'
    const info = this.info ?? await this.join()
    this.context = new AudioContext()
    await this.context.audioWorklet.addModule(`${this.baseUrl}/web-call/worklet.js`)
    this.player = new AudioWorkletNode(this.context, 'switchboard-player', { numberOfInputs: 0, outputChannelCount: [1] })
    this.player.port.onmessage = (event) => {
      this.playedSeconds = event.data.seconds
      this.emit('played', { seconds: event.data.seconds })
    }
    this.player.connect(this.context.destination)
    await this.context.resume()
    const url = new URL(`${this.baseUrl}${info.stream_path}`)
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:'
    url.searchParams.set('access_token', this.accessToken)
    this.socket = new WebSocket(url)
    this.socket.binaryType = 'arraybuffer'
    this.socket.onmessage = (message) => this.receive(message.data)
    this.socket.onclose = (event) => this.closed(event)
    await new Promise((resolve, reject) => {
      this.socket.addEventListener('open', resolve, { once: true })
      this.socket.addEventListener('close', () => reject(new Error('the call\'s stream was refused')), { once: true })
    })
    this.state = 'connected'
  }

  async join () {
    const joined = await fetch(`${this.baseUrl}/web-call/join`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ access_token: this.accessToken })
    })
    const info = await joined.json()
    if (!joined.ok) {
      this.state = 'ended'
      throw new Error(info.message || `joining failed with ${joined.status}`)
    }
    this.info = info
    return info
  }

  receive (data) {
    if (data instanceof ArrayBuffer) {
      this.player.port.postMessage({ type: 'audio', samples: data }, [data])
      return
    }
    const event = JSON.parse(data)
    if (event.type === 'clear') this.player.port.postMessage({ type: 'clear' })
    if (event.type === 'ready') {
      this.mode = event.mode
      if (event.mode === 'voice' && this.microphone) {
        this.openMicrophone().catch((err) => this.emit('error', { code: 'microphone', message: err.message }))
      }
    }
    if (event.type === 'ended') this.ending = event
    this.emit(event.type, event)
  }

  async openMicrophone () {
    this.stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true } })
    for (const track of this.stream.getAudioTracks()) track.enabled = !this.muted
    const source = this.context.createMediaStreamSource(this.stream)
    this.analyser = this.context.createAnalyser()
    this.analyser.fftSize = 1024
    this.samples = new Float32Array(this.analyser.fftSize)
    source.connect(this.analyser)
    this.capture = new AudioWorkletNode(this.context, 'switchboard-microphone', { numberOfOutputs: 1, outputChannelCount: [1] })
    this.capture.port.onmessage = (event) => {
      if (this.socket.readyState === WebSocket.OPEN) this.socket.send(event.data)
    }
    // A muted path to the speakers keeps the worklet running.
    const mute = this.context.createGain()
    mute.gain.value = 0
    source.connect(this.capture).connect(mute).connect(this.context.destination)
    this.emit('microphone', {})
  }

  /** A typed turn; false when the call's stream is not open (nothing was sent). */
  sendText (text) {
    if (this.socket?.readyState !== WebSocket.OPEN) return false
    this.socket.send(JSON.stringify({ type: 'text', text }))
    return true
  }

  /** Mutes or unmutes the microphone: a muted track gives silence, so the call's audio keeps to the clock. */
  setMuted (muted) {
    this.muted = muted
    for (const track of this.stream?.getAudioTracks() ?? []) track.enabled = !muted
  }

  /** The microphone's loudness now (root mean square of the last 1,024 samples, scaled so speech nears 1); 0 before it opens. */
  level () {
    if (this.analyser === undefined) return 0
    this.analyser.getFloatTimeDomainData(this.samples)
    let sum = 0
    for (const sample of this.samples) sum += sample * sample
    return Math.min(1, Math.sqrt(sum / this.samples.length) * 4)
  }

  /** Keypad presses (0-9, *, #, A-D), as a phone's keypad sends them. */
  sendDigits (digits) {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify({ type: 'dtmf', digits }))
  }

  hangup () {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify({ type: 'hangup' }))
  }

  closed (event) {
    this.state = 'ended'
    for (const track of this.stream?.getTracks() ?? []) track.stop()
    this.context?.close()
    if (this.ending === undefined) this.emit('ended', { type: 'ended', reason: event.code === 1000 ? 'user_hangup' : `closed (${event.code})` })
  }
}
