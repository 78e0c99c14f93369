import t from 'tap'
import { escapeHtml } from '../../src/http/home.ts'
import { setup } from '../helpers/app.ts'

t.test('GET / is a small page that links to the docs and the health check', async (t) => {
  const { app } = await setup(t)
  const res = await app.inject({ method: 'GET', url: '/' })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-type'], 'text/html; charset=utf-8')
  t.match(res.headers['content-security-policy'], /default-src 'none'/, 'no script may run')
  t.match(res.body, /<a href="\/docs">/)
  t.match(res.body, /<a href="\/health">/)
  t.notMatch(res.body, /<script/i)
  t.notOk((await app.inject({ method: 'GET', url: '/openapi.json' })).json().paths['/'], 'not part of the API document')
})

t.test('the page escapes what it prints', async (t) => {
  t.equal(escapeHtml('<a href="x" onclick=\'y\'>&</a>'), '&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;')
})
