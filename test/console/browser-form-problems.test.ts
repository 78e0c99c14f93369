import t from 'tap'
import { signedInChromium } from '../helpers/chromium.ts'
import { poll } from '../helpers/poll.ts'

// After a refused save of the agent form, focus is on the error summary and each of its links moves focus to its
// field, with no script: the redirect opens the page at #form-problems, and the browser focuses a fragment's target
// when it is focusable (the summary's tabindex="-1", the fields themselves).

t.test('a refused agent form: focus on the error summary, its links focus their fields', async (t) => {
  const { url, page, problems } = await signedInChromium(t)
  await page.goto(`${url}/agents/new`)
  await page.locator('#agent_name').fill('Bistro')
  await page.locator('#language').fill('not a tag')
  await page.locator('#widget_settings-primary_color').fill('blue')
  await page.getByRole('button', { name: 'Create agent' }).click()
  await page.waitForURL(/\/agents\/new\?draft=[0-9a-f]{24}#form-problems$/)
  const focused = async () => await page.evaluate('document.activeElement?.id') as string | undefined
  // Without an answer within 5 s, the assertion below shows what has focus.
  t.equal(await poll(focused, (id) => id === 'form-problems', { timeoutMs: 5000 }), 'form-problems', 'focus is on the error summary')
  const links = page.locator('#form-problems a')
  t.equal(await links.count(), 2)
  t.equal(await links.first().getAttribute('href'), '#language')

  await links.first().click()
  t.equal(await focused(), 'language', 'its first link focuses the language')
  await page.keyboard.type('-x')
  t.match(await page.locator('#language').inputValue(), /^(not a tag-x|-xnot a tag)$/, 'where typing goes on')
  // By keyboard: back to the summary, the second link with Enter.
  await page.locator('#form-problems').focus()
  await page.keyboard.press('Tab')
  await page.keyboard.press('Tab')
  await page.keyboard.press('Enter')
  t.equal(await focused(), 'widget_settings-primary_color', 'the second link, by keyboard, focuses the colour')
  t.same(problems, [], 'no script errors and no CSP violations')
})
