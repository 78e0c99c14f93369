// "Talk to this agent" on the agent's page (console/agents.ts): the web call's controls of /web-call/panel.js, held
// in the page. Pressing the button makes the call (POST /agents/:id/talk answers its id and access token), so no
// call is recorded before it; when the call ends, "View this call" links its page and "Call again" makes another.
import { mountCall } from '/web-call/panel.js'

const root = document.getElementById('talk-call')
if (root !== null) {
  mountCall(root, {
    prefix: 'talk-',
    startLabel: 'Talk to this agent',
    ready: '',
    again: true,
    callPage: (callId) => `/calls/${callId}`,
    token: async () => {
      const answer = await fetch(root.dataset.action, {
        method: 'POST',
        headers: { accept: 'application/json' },
        body: new URLSearchParams({ csrf_token: root.dataset.csrf })
      })
      const body = answer.headers.get('content-type')?.startsWith('application/json') === true ? await answer.json() : {}
      if (!answer.ok) throw new Error(body.message ?? `No call: the console answered ${answer.status}. Reload the page and try again.`)
      return { accessToken: body.access_token, callId: body.call_id }
    }
  })
}
