/* global location */
// The web-call page: joins the call named by the access token in the address's fragment (never sent to
// the server in a request line or a log) with the controls of panel.js. The token opens one call: no "Call again".
import { mountCall } from './panel.js'

const token = new URLSearchParams(location.hash.slice(1)).get('access_token')
const root = document.getElementById('call')

if (token) {
  mountCall(root, {
    token: async () => ({ accessToken: token }),
    onJoined: (call) => { document.getElementById('title').textContent = call.info.agent_name }
  })
} else {
  const status = document.createElement('p')
  status.id = 'status'
  status.append('Open this page with ', Object.assign(document.createElement('code'), { textContent: '#access_token=…' }), ' from make-web-call.')
  root.append(status)
}
