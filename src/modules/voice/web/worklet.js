// Audio worklets of the Switchboard web-call client: the microphone cut into 20 ms frames of 16 kHz PCM16,
// and a player for the agent's 16 kHz audio. Both resample linearly to and from the context's rate.
/* global sampleRate, AudioWorkletProcessor, registerProcessor */

const RATE = 16000
const FRAME = 320

class Microphone extends AudioWorkletProcessor {
  constructor () {
    super()
    this.step = sampleRate / RATE
    // Position of the next output sample in the input stream, relative to the current block.
    this.position = 0
    this.previous = 0
    this.frame = new Int16Array(FRAME)
    this.filled = 0
  }

  process (inputs) {
    const input = inputs[0] && inputs[0][0]
    if (input === undefined) return true
    while (this.position < input.length) {
      const left = Math.floor(this.position)
      const fraction = this.position - left
      const a = left < 0 ? this.previous : input[left]
      const b = left + 1 < input.length ? input[left + 1] : input[input.length - 1]
      const value = Math.max(-1, Math.min(1, a + (b - a) * fraction))
      this.frame[this.filled++] = Math.round(value * 32767)
      if (this.filled === FRAME) {
        this.port.postMessage(this.frame.buffer, [this.frame.buffer])
        this.frame = new Int16Array(FRAME)
        this.filled = 0
      }
      this.position += this.step
    }
    this.position -= input.length
    this.previous = input[input.length - 1]
    return true
  }
}

class Player extends AudioWorkletProcessor {
  constructor () {
    super()
    this.step = RATE / sampleRate
    this.buffer = new Float32Array(RATE * 60)
    this.write = 0
    this.read = 0
    this.played = 0
    this.reported = 0
    this.port.onmessage = (event) => {
      if (event.data.type === 'clear') {
        this.read = this.write
        return
      }
      const samples = new Int16Array(event.data.samples)
      for (let i = 0; i < samples.length; i++) this.buffer[(this.write + i) % this.buffer.length] = samples[i] / 32768
      this.write += samples.length
    }
  }

  process (_inputs, outputs) {
    const output = outputs[0][0]
    for (let i = 0; i < output.length; i++) {
      if (this.read + 1 >= this.write) {
        output[i] = 0
        continue
      }
      const left = Math.floor(this.read)
      const fraction = this.read - left
      const a = this.buffer[left % this.buffer.length]
      const b = this.buffer[(left + 1) % this.buffer.length]
      output[i] = a + (b - a) * fraction
      this.read += this.step
      this.played++
    }
    // Tells the page how much agent audio it has played (about every 100 ms while playing).
    if (this.played - this.reported >= sampleRate / 10) {
      this.reported = this.played
      this.port.postMessage({ type: 'played', seconds: this.played / sampleRate })
    }
    return true
  }
}

registerProcessor('switchboard-microphone', Microphone)
registerProcessor('switchboard-player', Player)
