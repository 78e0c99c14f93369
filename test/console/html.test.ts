import t from 'tap'
import { escapeHtml, html, raw } from '../../src/modules/console/html.ts'
import { hashPassword, passwordProblem, verifyPassword } from '../../src/modules/console/passwords.ts'
import { originAllowed, parseCookies, sameToken, serializeCookie } from '../../src/modules/console/security.ts'

t.test('html`…` escapes every value unless it is already HTML', async (t) => {
  t.equal(escapeHtml('<a href="x" onclick=\'y\'>&</a>'), '&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;')
  const name = '<script>alert(1)</script>'
  t.equal(html`<p title="${'"x"'}">${name}</p>`.value, '<p title="&quot;x&quot;">&lt;script&gt;alert(1)&lt;/script&gt;</p>')
  t.equal(html`<ul>${['<a>', html`<li>${'&'}</li>`]}</ul>`.value, '<ul>&lt;a&gt;<li>&amp;</li></ul>', 'arrays joined, each item by the same rule')
  t.equal(html`${null}${undefined}${false}${0}`.value, '0', 'null, undefined and false are nothing; 0 is a value')
  t.equal(html`${raw('<br>')}`.value, '<br>')
  t.equal(String(html`<b>${'x'}</b>`), '<b>x</b>')
})

t.test('passwords: scrypt with its parameters and salt in the stored string', async (t) => {
  const stored = await hashPassword('correct horse battery')
  t.match(stored, /^scrypt\$32768\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/)
  t.not(await hashPassword('correct horse battery'), stored, 'a new salt every time')
  t.ok(await verifyPassword('correct horse battery', stored))
  t.notOk(await verifyPassword('correct horse batterY', stored))
  t.notOk(await verifyPassword('x', 'md5$whatever'), 'an unknown form matches nothing')
  t.match(passwordProblem('short'), /at least 10 characters/)
  t.equal(passwordProblem('ten chars!'), undefined)
  t.match(passwordProblem('x'.repeat(1025)), /at most 1024/)
})

t.test('cookies, tokens and origins', async (t) => {
  t.same([...parseCookies('a=1; b="two"; a=3; bad=%E0%A4%A; =x; c')], [['a', '1'], ['b', 'two']])
  t.same([...parseCookies(undefined)], [])
  t.equal(serializeCookie('s', 'v', { maxAgeSeconds: 60, secure: true }), 's=v; Path=/; HttpOnly; SameSite=Lax; Max-Age=60; Secure')
  t.ok(sameToken('abc', 'abc'))
  t.notOk(sameToken('abd', 'abc'))
  t.notOk(sameToken('ab', 'abc'))
  t.notOk(sameToken(undefined, 'abc'))
  t.notOk(sameToken('', ''), 'no expected token: nothing matches')
  t.ok(originAllowed(undefined, 'https://voice.example.test', '127.0.0.1:3000'))
  t.ok(originAllowed('https://voice.example.test', 'https://voice.example.test', '127.0.0.1:3000'))
  t.ok(originAllowed('http://127.0.0.1:3000', 'https://voice.example.test', '127.0.0.1:3000'))
  t.notOk(originAllowed('https://evil.example.test', 'https://voice.example.test', '127.0.0.1:3000'))
  t.notOk(originAllowed('null', 'https://voice.example.test', '127.0.0.1:3000'))
})
