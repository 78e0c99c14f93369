import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { chromium, type Browser, type Page } from 'playwright-core'
import type { Test } from 'tap'
import { setup } from './app.ts'
import { createConsoleUser, PASSWORD } from './console-client.ts'

// Debian's `chromium`, headless, for the tests that drive real pages (the console, browser calls).

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

/**
 * Flags of a browser with a caller at it: a fake microphone playing test/fixtures/audio/caller.wav, allowed without
 * asking, and the agent's audio played without a gesture.
 */
export const FAKE_CALLER = [
  '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream',
  `--use-file-for-fake-audio-capture=${path.resolve(import.meta.dirname, '../fixtures/audio/caller.wav')}`,
  '--autoplay-policy=no-user-gesture-required'
]

/** A browser closed at the test's end; `args` adds flags (a fake microphone, say). */
export async function launchChromium (t: Test, args: string[] = []): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (or set CHROMIUM_PATH)`)
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run',
      // Nothing leaves this machine: every host name but localhost fails to resolve.
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1',
      ...args
    ]
  })
  t.teardown(() => browser.close())
  return browser
}

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

export interface AxeViolation { id: string, impact: string | null, help: string, targets: string[] }

/**
 * What axe-core finds against WCAG 2.1 A and AA in the page as it is now. The script is evaluated over the
 * DevTools protocol, which the page's CSP does not govern, so the page keeps its own policy.
 */
export async function axeViolations (page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE)
  return await page.evaluate(`axe.run(document, { runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] }).then((result) =>
    result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(' ')) })))`)
}

/** Signs in on the console's sign-in page and waits for the page it leads to (the agents). */
export async function signInAt (page: Page, url: string, email: string, password: string): Promise<void> {
  await page.goto(`${url}/login`)
  await page.getByLabel('E-mail address').fill(email)
  await page.getByLabel('Password').fill(password)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(`${url}/agents`)
}

export interface PageWatch {
  /** The page's uncaught script errors and console errors, in order. */
  problems: string[]
  /** axe-core's findings per page state, by the name `check` was given. */
  axe: Record<string, AxeViolation[]>
  check: (name: string) => Promise<void>
}

/**
 * Watches a page as every console test does: its script errors and console errors become `problems` (with
 * `failedLoads: 'ignored'`, Chromium's "Failed to load resource" for the 4xx pages a test asks for on purpose is left
 * out), and `check` records axe-core's findings for the page as it is now. Pages of one test may share `problems`.
 */
export function watchPage (page: Page, options: { failedLoads?: 'ignored', problems?: string[] } = {}): PageWatch {
  const problems = options.problems ?? []
  page.on('pageerror', (err) => problems.push(err.message))
  page.on('console', (message) => {
    if (message.type() !== 'error') return
    if (options.failedLoads === 'ignored' && message.text().startsWith('Failed to load resource')) return
    problems.push(message.text())
  })
  const axe: Record<string, AxeViolation[]> = {}
  return { problems, axe, check: async (name) => { axe[name] = await axeViolations(page) } }
}

/**
 * Opens a section from the console's header as a person would: a link of the bar directly, one of the account
 * menu (docs/console.md, "The frame") after opening the menu.
 */
export async function openSection (page: Page, name: string): Promise<void> {
  const header = page.locator('header.top')
  if (await header.locator('.top > nav').getByRole('link', { name, exact: true }).count() === 0) await header.locator('.account summary').click()
  await header.getByRole('link', { name, exact: true }).click()
}

/**
 * The set-up of most console tests in Chromium: a listening app (`env` for its configuration), a console user, and a
 * page of a browser of its own signed in as them, watched (watchPage).
 */
export async function signedInChromium (t: Test, env: Record<string, string> = {}) {
  const ctx = await setup(t, env)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const browser = await launchChromium(t)
  const page = await browser.newPage()
  const watch = watchPage(page)
  await signInAt(page, url, user.email, PASSWORD)
  return { ctx, url, user, browser, page, ...watch }
}
