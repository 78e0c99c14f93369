import t from 'tap'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { axeViolations, launchChromium, openSection, signInAt, watchPage } from '../helpers/chromium.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'
import { startInbox } from '../helpers/smtp.ts'

// Workspaces in real Chromium: the owner creates one and invites a person; the invitation goes to a local SMTP server
// (the owner never sees its link); the person follows it in another browser, chooses a password, and sees only the
// workspace's agent.

t.test('invite a member who then signs in and sees only that workspace: in Chromium', async (t) => {
  const inbox = await startInbox(t)
  const ctx = await setup(t, { SMTP_URL: inbox.url })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const owner = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, owner.id)
  const account = { user: owner, key, headers: { 'x-api-key': key } }
  const browser = await launchChromium(t)
  const problems: string[] = []
  const axe: Record<string, unknown> = {}
  const watch = (page: import('playwright-core').Page) => watchPage(page, { problems })

  const ownerPage = await (await browser.newContext()).newPage()
  watch(ownerPage)
  await signInAt(ownerPage, url, owner.email, PASSWORD)
  await openSection(ownerPage, 'Workspaces')
  axe.workspaces = await axeViolations(ownerPage)
  await ownerPage.getByLabel('Name').fill('Front office')
  await ownerPage.getByRole('button', { name: 'Create workspace' }).click()
  await ownerPage.waitForURL(/\/workspaces\/[0-9a-f]{24}$/)
  const workspaceId = new URL(ownerPage.url()).pathname.split('/')[2]
  await createAgent(ctx.app, account, { agent_name: 'Receptionist' }, `?workspace_id=${workspaceId}`)
  await createAgent(ctx.app, account, { agent_name: 'Owner only' })

  await ownerPage.getByLabel('E-mail address').fill('colleague@example.com')
  await ownerPage.getByLabel('Role').selectOption('member')
  await ownerPage.getByRole('button', { name: 'Invite' }).click()
  await ownerPage.getByText('Invitation e-mailed to colleague@example.com.').waitFor()
  t.match(ownerPage.url(), /\/workspaces\/[0-9a-f]{24}\?done=mailed&email=colleague%40example\.com$/, 'Post/Redirect/Get: the page says what was done')
  axe.workspace = await axeViolations(ownerPage)
  const [mail] = await inbox.waitFor(1)
  const link = /http:\/\/localhost:3000\/invitations\/wi_\w+/.exec(mail.raw.replace(/=\r\n/g, ''))![0]
  t.notMatch(await ownerPage.content(), 'wi_', 'the owner never sees the link')

  const memberPage = await (await browser.newContext()).newPage()
  watch(memberPage)
  await memberPage.goto(`${url}${new URL(link).pathname}`)
  t.match(await memberPage.locator('main').textContent(), /invited colleague@example.com to the workspace\s+Front office as a member/)
  axe.invitation = await axeViolations(memberPage)
  await memberPage.getByLabel('Password', { exact: true }).fill(PASSWORD)
  await memberPage.getByLabel('Password again').fill(PASSWORD)
  await memberPage.getByRole('button', { name: 'Accept and create my account' }).click()
  await memberPage.waitForURL(`${url}/agents`)
  t.equal(await memberPage.locator('.account .context').textContent(), 'Workspace Front office (member)')
  const names = await memberPage.locator('main tbody td:first-child').allTextContents()
  t.same(names, ['Receptionist'], 'only the workspace\'s agent')
  t.equal(await memberPage.getByRole('link', { name: 'New agent' }).count(), 0, 'a member creates nothing')
  t.equal(await memberPage.locator('header a[href="/keys"]').count(), 0, 'the account pages are not listed in a workspace')
  axe.memberAgents = await axeViolations(memberPage)
  await memberPage.getByRole('link', { name: 'Receptionist' }).click()
  t.ok(await memberPage.getByLabel('Name', { exact: true }).isDisabled(), 'the agent\'s settings are read-only')
  axe.memberAgent = await axeViolations(memberPage)

  // The owner removes the member: their next page is their own, empty account.
  await ownerPage.getByRole('button', { name: 'Remove colleague@example.com' }).click()
  await ownerPage.getByText('colleague@example.com is no longer a member.').waitFor()
  await memberPage.goto(`${url}/agents`)
  t.equal(await memberPage.locator('.account .context').textContent(), 'Your account')
  t.equal(await memberPage.locator('main tbody tr').count(), 0)

  t.same(axe, { workspaces: [], workspace: [], invitation: [], memberAgents: [], memberAgent: [] }, 'axe-core: no WCAG 2.1 A/AA violations')
  t.same(problems, [], 'no script errors and no CSP violations')
})
