import t from 'tap'
import { unreachableFromInternet } from '../../src/http/addresses.ts'

// Whether Twilio (a service on the internet) can call back PUBLIC_BASE_URL: https:// on a public name or address.
// A pure check: nothing is resolved or connected.

t.test('https on a public name or address is reachable', async (t) => {
  for (const url of ['https://switchboard.example.com', 'https://voice.acme.co.uk:8443', 'https://SB.Example.COM.', 'https://93.184.216.34', 'https://[2606:4700::1111]', 'https://abc123.ngrok.app']) {
    t.equal(unreachableFromInternet(url), undefined, url)
  }
})

t.test('plain http, loopback, private and reserved addresses, and private names are not', async (t) => {
  const refused: Array<[string, RegExp]> = [
    ['http://switchboard.example.com', /not https/],
    ['http://localhost:3000', /not https/],
    ['https://localhost', /localhost is not a public name/],
    ['https://app.localhost', /\.localhost/],
    ['https://127.0.0.1:3000', /private, loopback or reserved/],
    ['https://10.1.2.3', /private/],
    ['https://172.16.0.9', /private/],
    ['https://192.168.1.20', /private/],
    ['https://169.254.169.254', /private/],
    ['https://100.64.0.1', /private/],
    ['https://[::1]', /private/],
    ['https://[fd00::1]', /private/],
    ['https://[::ffff:10.0.0.1]', /private/],
    ['https://switchboard', /switchboard is not a public name/],
    ['https://printer.local', /\.local\)/],
    ['https://sb.internal', /\.internal\)/],
    ['https://voice.example.test', /\.test\)/],
    ['https://sb.example', /\.example\)/],
    ['https://sb.invalid', /\.invalid\)/],
    ['https://nas.home.arpa', /\.home\.arpa\)/],
    ['https://sb.lan', /\.lan\)/],
    ['https://sb.corp', /\.corp\)/],
    ['not a url', /not a URL/]
  ]
  for (const [url, why] of refused) t.match(unreachableFromInternet(url), why, url)
})
