import { existsSync } from 'node:fs'
import { chromium, type Browser } from 'playwright-core'
import type { Test } from 'tap'

// Debian's `chromium`, headless, for the tests that drive real pages (the console, browser calls).

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

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
