import t from 'tap'
import type { Page } from 'playwright-core'
import { setup } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'

// The console's frame in Chromium: the header stays one line at 1,100 px and wider (the bar's sections side by
// side, the rest in the account menu), a phone gets the brand and the menu on one line and the sections,
// scrolling sideways, on the next; tables use the screen's width. SHOTS=<folder> keeps a screenshot of each state.

const shot = async (page: Page, name: string) => {
  if (process.env.SHOTS !== undefined) await page.screenshot({ path: `${process.env.SHOTS}/${name}.png`, fullPage: true })
}

/** The header's height, and the distinct middles (to 8 px) of the brand, the bar's links and the menu's summary. */
const headerLines = async (page: Page) => await page.evaluate(`(() => {
  const top = document.querySelector('header.top').getBoundingClientRect()
  const parts = [...document.querySelectorAll('.top .brand, .top > nav a, .account summary')].map((el) => el.getBoundingClientRect())
  const nav = document.querySelector('.top > nav')
  return {
    height: Math.round(top.height),
    lines: new Set(parts.map((box) => Math.round((box.top + box.height / 2) / 8))).size,
    hidden: nav.scrollWidth > nav.clientWidth
  }
})()`) as { height: number, lines: number, hidden: boolean }

t.test('the header keeps one line at 1,100 and 1,400 px, two on a phone; tables use the width', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id)
  const agent = await createAgent(ctx.app, { user, key, headers: { 'x-api-key': key } }, { agent_name: 'Front desk' })
  await insertCalls(ctx.db, user.id, agent, Array.from({ length: 3 }, () => ({})))
  const browser = await launchChromium(t)
  const page = await browser.newPage()
  const watch = watchPage(page, { failedLoads: 'ignored' })
  await signInAt(page, url, user.email, PASSWORD)

  const oneLine = { lines: 1, hidden: false }
  for (const width of [1100, 1400]) {
    await page.setViewportSize({ width, height: 800 })
    for (const path of ['/agents', '/calls', '/keys', '/no-such-page']) {
      await page.goto(`${url}${path}`)
      const header = await headerLines(page)
      t.match(header, oneLine, `${width} px ${path}: one line, every section shown`)
      t.ok(header.height <= 60, `${width} px ${path}: ${header.height} px high`)
      await shot(page, `${width}${path.replaceAll('/', '-')}`)
    }
    await page.goto(`${url}/calls`)
    const table = await page.evaluate('[document.querySelector(\'main table\').getBoundingClientRect().width, document.documentElement.clientWidth]') as number[]
    t.ok(table[0] > table[1] - 60, `${width} px: the calls table is ${Math.round(table[0])} px of ${table[1]}`)
    await watch.check(`calls ${width}`)
  }

  // The account menu: closed, its links are not shown; opened, the account pages, the password and signing out.
  await page.setViewportSize({ width: 1100, height: 800 })
  await page.goto(`${url}/agents`)
  t.notOk(await page.getByRole('link', { name: 'API keys' }).isVisible(), 'closed')
  await page.locator('.account summary').click()
  t.ok(await page.getByRole('link', { name: 'API keys' }).isVisible(), 'opened')
  t.ok(await page.getByRole('button', { name: 'Sign out' }).isVisible())
  await shot(page, '1100-menu-open')
  await watch.check('menu open')
  await page.getByRole('link', { name: 'API keys' }).click()
  await page.waitForURL(`${url}/keys`)
  t.equal(await page.locator('.account summary.current').count(), 1, 'the menu says the current page is in it')

  // A phone: two lines (brand and menu, then the sections), the sections scroll sideways instead of wrapping.
  await page.setViewportSize({ width: 390, height: 800 })
  for (const path of ['/agents', '/calls']) {
    await page.goto(`${url}${path}`)
    const header = await headerLines(page)
    t.equal(header.lines, 2, `phone ${path}: two lines`)
    t.ok(header.height <= 110, `phone ${path}: ${header.height} px high`)
    t.equal(await page.evaluate('document.documentElement.scrollWidth <= document.documentElement.clientWidth'), true, 'the page itself does not scroll sideways')
    await shot(page, `390${path.replaceAll('/', '-')}`)
  }
  await page.locator('.account summary').click()
  const menu = await page.locator('.account .menu').boundingBox()
  t.ok(menu !== null && menu.x >= 0 && menu.x + menu.width <= 390, 'the opened menu fits the screen')
  await shot(page, '390-menu-open')
  await watch.check('phone menu open')

  // A person without agents saves a password: the next step is their first agent.
  await page.setViewportSize({ width: 1100, height: 800 })
  const newcomer = await createConsoleUser(ctx.db)
  const second = await browser.newPage({ viewport: { width: 1100, height: 800 } })
  const secondWatch = watchPage(second, { failedLoads: 'ignored', problems: watch.problems })
  await signInAt(second, url, newcomer.email, PASSWORD)
  await second.goto(`${url}/account/password`)
  await second.getByLabel('Current password').fill(PASSWORD)
  await second.getByLabel('New password', { exact: true }).fill('a new long password')
  await second.getByLabel('New password again').fill('a new long password')
  await second.getByRole('button', { name: 'Save password' }).click()
  await second.getByRole('heading', { name: 'Your password is saved' }).waitFor()
  await secondWatch.check('password saved')
  await shot(second, '1100-password-saved')
  await second.getByRole('link', { name: 'Next: create your first agent' }).click()
  await second.waitForURL(`${url}/agents/start`)
  await second.goto(`${url}/no-such-page`)
  await secondWatch.check('404')

  t.same(watch.axe, { 'calls 1100': [], 'calls 1400': [], 'menu open': [], 'phone menu open': [] }, 'axe-core: no WCAG 2.1 A/AA violations')
  t.same(secondWatch.axe, { 'password saved': [], 404: [] }, 'axe-core: the password step and the 404 page')
  t.same(watch.problems, [], 'no script errors and no CSP violations')
})
