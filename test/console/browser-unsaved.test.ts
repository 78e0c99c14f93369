import t from 'tap'
import type { Page } from 'playwright-core'
import { signedInChromium } from '../helpers/chromium.ts'
import { poll } from '../helpers/poll.ts'

// The agent form asks before the page is left with changes not saved (static/unsaved.js), and not after Save or
// without changes.

/** The dialogs the page asked, dismissed (so the page stays) or accepted. */
function dialogs (page: Page, answer: 'dismiss' | 'accept'): string[] {
  const asked: string[] = []
  page.on('dialog', (dialog) => {
    asked.push(dialog.type())
    void dialog[answer]()
  })
  return asked
}

t.test('leaving the agent form: asked with unsaved changes, not after Save or without changes', async (t) => {
  const { url, page, problems } = await signedInChromium(t)
  await page.goto(`${url}/agents/new`)

  // No change: leaving asks nothing.
  let asked = dialogs(page, 'accept')
  await page.goto(`${url}/calls`)
  t.same(asked, [], 'an untouched form lets the page go')
  page.removeAllListeners('dialog')

  // A change, then leaving: asked; dismissed, the page and what was typed stay.
  await page.goto(`${url}/agents/new`)
  await page.locator('#agent_name').click()
  await page.keyboard.type('Bistro')
  asked = dialogs(page, 'dismiss')
  await page.locator('header.top').getByRole('link', { name: 'Calls', exact: true }).click()
  await poll(() => asked.length, (n) => n > 0, { message: 'no dialog was asked' })
  t.same(asked, ['beforeunload'], 'leaving with a change asks first')
  t.match(page.url(), /\/agents\/new$/, 'dismissed: still on the form')
  t.equal(await page.locator('#agent_name').inputValue(), 'Bistro', 'with what was typed')
  page.removeAllListeners('dialog')

  // Saving sends the form without asking.
  asked = dialogs(page, 'accept')
  await page.getByRole('button', { name: 'Create agent' }).click()
  await page.waitForURL(/\/agents\/[0-9a-f]{24}\?saved=1$/)
  t.same(asked, [], 'Save does not ask')
  await page.goto(`${url}/calls`)
  t.same(asked, [], 'the saved agent\'s page lets the page go')
  t.same(problems, [], 'no script errors and no CSP violations')
})
