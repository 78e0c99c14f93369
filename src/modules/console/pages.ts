import { dataTable } from './components.ts'
import { html, type SafeHtml } from './html.ts'
import type { WorkspaceRole } from '../../db/schema.ts'
import { MIN_PASSWORD_LENGTH } from './passwords.ts'
import type { ConsoleSession } from './queries.ts'
import { HOME } from './security.ts'

/**
 * The console's sections; a new page adds its entry here. `account`: about the person's own account, so not
 * listed while they work in a workspace (docs/console.md, "Workspaces and members"). `menu`: in the account
 * menu rather than the bar, which holds what building and running agents needs and stays one line at 1,100 px.
 */
const NAV: Array<{ href: string, label: string, account?: true, menu?: true }> = [
  { href: '/agents', label: 'Agents' },
  { href: '/knowledge-bases', label: 'Knowledge bases' },
  { href: '/phone-numbers', label: 'Phone numbers', account: true },
  { href: '/campaigns', label: 'Campaigns', account: true },
  { href: '/calls', label: 'Calls' },
  { href: '/contacts', label: 'Contacts' },
  { href: '/analytics', label: 'Analytics' },
  { href: '/appointments', label: 'Appointments', menu: true },
  { href: '/workspaces', label: 'Workspaces', menu: true },
  { href: '/deliveries', label: 'Deliveries', menu: true },
  { href: '/integrations', label: 'Integrations', account: true, menu: true },
  { href: '/customers', label: 'Customers', account: true, menu: true },
  { href: '/do-not-call', label: 'Do not call', account: true, menu: true },
  { href: '/subscription', label: 'Subscription', account: true, menu: true },
  { href: '/keys', label: 'API keys', account: true, menu: true },
  { href: '/settings', label: 'Settings', account: true, menu: true },
  { href: '/account/password', label: 'Password', menu: true }
]

// What whoever opens the server in a browser may want besides the console.
const LINKS = [
  { href: '/docs', label: 'API reference', note: 'every /v1 route, tried out with your x-api-key' },
  { href: '/openapi.json', label: 'OpenAPI document', note: 'for client generators' },
  { href: '/health', label: 'Health', note: 'whether the server and its database are up' }
]

export interface Viewer {
  email: string
  csrfToken: string
  /** The workspace the person works in; undefined: their own account. */
  workspace?: { name: string, role: WorkspaceRole }
}

export const viewerOf = (session: ConsoleSession): Viewer => ({
  email: session.email,
  csrfToken: session.csrfToken,
  workspace: session.workspace === undefined ? undefined : { name: session.workspace.name, role: session.workspace.role }
})

export interface PageOptions {
  title: string
  /** The signed-in person; undefined on the sign-in pages. */
  viewer?: Viewer
  /** The NAV entry to mark as the current page. */
  current?: string
  body: SafeHtml
}

export const csrfField = (token: string) => html`<input type="hidden" name="csrf_token" value="${token}">`

const navLink = (item: { href: string, label: string }, current: string | undefined) =>
  html`<li><a href="${item.href}"${item.href === current && html` aria-current="page"`}>${item.label}</a></li>`

/**
 * The bar's sections, then the account menu (a <details>, no script): the other sections, the password and
 * signing out. Its summary says where the person works; a long workspace name is cut short by the stylesheet.
 */
function topNav (viewer: Viewer, current: string | undefined): SafeHtml {
  const items = NAV.filter((item) => viewer.workspace === undefined || item.account !== true)
  const where = viewer.workspace === undefined ? 'Your account' : `Workspace ${viewer.workspace.name} (${viewer.workspace.role})`
  const inMenu = items.filter((item) => item.menu === true)
  return html`<nav aria-label="Console">
    <ul>${items.filter((item) => item.menu !== true).map((item) => navLink(item, current))}</ul>
  </nav>
  <details class="account">
    <summary${inMenu.some((item) => item.href === current) && html` class="current"`}><span class="context">${where}</span></summary>
    <div class="menu">
      <p>Signed in as <strong>${viewer.email}</strong></p>
      <nav aria-label="Account"><ul>${inMenu.map((item) => navLink(item, current))}</ul></nav>
      <form method="post" action="/logout">${csrfField(viewer.csrfToken)}<button type="submit" class="link">Sign out</button></form>
    </div>
  </details>`
}

export function layout ({ title, viewer, current, body }: PageOptions): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Switchboard</title>
<link rel="stylesheet" href="/console/console.css">
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
${body.value.includes('<time datetime=') && html`<script src="/console/local-time.js" defer></script>`}
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <a class="brand" href="/">Switchboard</a>
  ${viewer !== undefined && topNav(viewer, current)}
</header>
<main id="main" tabindex="-1">
<h1>${title}</h1>
${body}
</main>
<footer>
  <ul>${LINKS.slice(0, 2).map((link) => html`<li><a href="${link.href}">${link.label}</a></li>`)}</ul>
</footer>
</body>
</html>
`.value
}

export const notice = (kind: 'error' | 'success', text: string | SafeHtml) =>
  html`<p class="notice ${kind}" role="${kind === 'error' ? 'alert' : 'status'}">${text}</p>`

export function signInPage (options: { csrfToken: string, email?: string, next: string, error?: string }): string {
  return layout({
    title: 'Sign in',
    body: html`
${options.error !== undefined && notice('error', options.error)}
<form method="post" action="/login" class="stack">
  ${csrfField(options.csrfToken)}
  ${options.next !== HOME && html`<input type="hidden" name="next" value="${options.next}">`}
  <label for="email">E-mail address</label>
  <input id="email" name="email" type="email" autocomplete="username" required value="${options.email ?? ''}">
  <label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required>
  <button type="submit">Sign in</button>
</form>
<p>No password yet, or forgotten? Whoever runs the server can make a one-time sign-in link:
<code>npm run cli -- user login-link --email you@example.com</code></p>
<h2>Also on this server</h2>
<ul>${LINKS.map((link) => html`<li><a href="${link.href}">${link.label}</a>: ${link.note}</li>`)}</ul>
`
  })
}

/**
 * After a password is saved, where to go next: `first-agent` for someone who may create agents and has none
 * (the first run: a sign-in link, a password, then an agent), `agents` otherwise.
 */
export type PasswordNext = 'first-agent' | 'agents'

export function passwordPage (options: { viewer: Viewer, hasPassword: boolean, needsCurrent: boolean, error?: string, done?: PasswordNext }): string {
  const { viewer, hasPassword, needsCurrent } = options
  return layout({
    title: hasPassword ? 'Change your password' : 'Set a password',
    viewer,
    current: '/account/password',
    body: html`
${options.done !== undefined && html`<section class="notice success" role="status" aria-labelledby="saved-title">
  <h2 id="saved-title">Your password is saved</h2>
  <p>Every other browser signed in as you has been signed out.</p>
  ${options.done === 'first-agent'
    ? html`<p><a class="next" href="/agents/start">Next: create your first agent</a></p>
  <p class="hint">A name, a begin message and a prompt are enough; then talk to it in this browser.</p>`
    : html`<p><a href="/agents">Back to your agents</a></p>`}
</section>`}
${options.error !== undefined && notice('error', options.error)}
${!hasPassword && html`<p>Set a password to sign in with your e-mail address next time.</p>`}
<form method="post" action="/account/password" class="stack">
  ${csrfField(viewer.csrfToken)}
  <input type="text" name="username" autocomplete="username" value="${viewer.email}" hidden>
  ${needsCurrent && html`<label for="current">Current password</label>
  <input id="current" name="current_password" type="password" autocomplete="current-password" required>`}
  <label for="new">New password</label>
  <input id="new" name="new_password" type="password" autocomplete="new-password" minlength="${MIN_PASSWORD_LENGTH}" required aria-describedby="new-hint">
  <p id="new-hint" class="hint">At least ${MIN_PASSWORD_LENGTH} characters. Other browsers signed in as you are signed out.</p>
  <label for="confirm">New password again</label>
  <input id="confirm" name="confirm_password" type="password" autocomplete="new-password" required>
  <button type="submit">Save password</button>
</form>`
  })
}

export interface KeyRow { id: string, prefix: string, name: string, created_at: Date, last_used_at: Date | null }

/**
 * A time (a Date or epoch ms) as `<time datetime>` with its UTC text to the minute (`seconds`: to the second, as
 * call times are), which static/local-time.js rewrites to the viewer's zone at the same precision (the layout links
 * it on every page that has a time, so that pages without one load no script); `none` for a missing one.
 */
export function when (time: Date | number | null, options: { none?: string, seconds?: true } = {}): SafeHtml | string {
  if (time === null) return options.none ?? 'never'
  const iso = new Date(time).toISOString()
  return html`<time datetime="${iso}">${iso.slice(0, options.seconds === true ? 19 : 16).replace('T', ' ')} UTC</time>`
}

export function keysPage (options: { viewer: Viewer, keys: KeyRow[], max: number, created?: { key: string, name: string }, error?: string }): string {
  const { viewer, keys, max, created } = options
  return layout({
    title: 'API keys',
    viewer,
    current: '/keys',
    body: html`
${created !== undefined && html`<section class="notice success created" aria-labelledby="created-title">
  <h2 id="created-title">New key${created.name !== '' && html` “${created.name}”`}</h2>
  <p>Copy it now: it is shown only this once. Switchboard keeps only a hash of it.</p>
  <p><code id="new-key" class="secret">${created.key}</code></p>
</section>`}
${options.error !== undefined && notice('error', options.error)}
<p>Requests to <code>/v1</code> carry one of these keys in the <code>x-api-key</code> header.
You have ${keys.length} of at most ${max} active keys.</p>
${dataTable({
  caption: 'Active keys',
  rows: keys,
  empty: 'No active keys.',
  columns: [
    { header: 'Key', cell: (key) => html`<code>${key.prefix}…</code>` },
    { header: 'Name', cell: (key) => key.name },
    { header: 'Created', cell: (key) => when(key.created_at) },
    { header: 'Last used', cell: (key) => when(key.last_used_at) },
    {
      header: html`<span class="visually-hidden">Actions</span>`,
      cell: (key) => html`<form method="post" action="/keys/${key.id}/revoke">${csrfField(viewer.csrfToken)}<button type="submit" class="danger" aria-label="Revoke ${key.prefix}…">Revoke</button></form>`
    }
  ]
})}
<h2>Create a key</h2>
${keys.length >= max
  ? html`<p>Revoke a key to create another: at most ${max} may be active.</p>`
  : html`<form method="post" action="/keys" class="stack">
  ${csrfField(viewer.csrfToken)}
  <label for="name">Name</label>
  <input id="name" name="name" maxlength="100" aria-describedby="name-hint">
  <p id="name-hint" class="hint">Optional, to tell keys apart, such as “crm integration”.</p>
  <button type="submit">Create key</button>
</form>`}`
  })
}

export function messagePage (title: string, text: string, viewer?: Viewer): string {
  return layout({ title, viewer, body: html`<p>${text}</p><p><a href="/">Back to the console</a></p>` })
}
