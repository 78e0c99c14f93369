import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { Type, type Static } from 'typebox'
import type { DB } from '../../db/database.ts'
import type { WorkspaceRole } from '../../db/schema.ts'
import { HttpError } from '../../http/errors.ts'
import { EMAIL_PATTERN } from '../../http/schemas.ts'
import type { Mailer } from '../../mail/mailer.ts'
import {
  acceptInvitationLink, createWorkspace, deleteWorkspace, findInvitation, inviteMember, listMembers, listMemberships, listWorkspaces,
  removeMember, renewInvitation, requireWorkspace, updateWorkspace, type Invitation
} from '../account/workspace-queries.ts'
import { inviteLinkCommand, sendInvitation } from '../account/workspaces.ts'
import { createUser, findUser } from '../users/queries.ts'
import { html } from './html.ts'
import { csrfField, layout, notice, viewerOf, when, type Viewer } from './pages.ts'
import { hashPassword, MIN_PASSWORD_LENGTH, passwordProblem } from './passwords.ts'
import { newSecret, setSessionWorkspace, type ConsoleSession } from './queries.ts'
import { HOME, parseCookies, LOGIN_CSRF_COOKIE, serializeCookie, sessionOf } from './security.ts'
import { formBody, idParams, page, sendPage, text } from './reply.ts'
import { KEYLESS } from '../../http/rate-limit.ts'
import { dataTable } from './components.ts'
import { DRAFT_QUERY, FORM_PROBLEM, draftOf, formSaved, refuseForm } from './drafts.ts'
import type { FormValues } from './forms.ts'

// Workspaces in the console (docs/console.md, "Workspaces and members"): where a person works (their own account
// or a workspace they belong to), their own workspaces with members and invitations, and the invitation e-mail's
// link, which makes a new person's account. What a member may see and change is scope.ts's one rule.
const EMAIL = new RegExp(EMAIL_PATTERN)
export const INVITATION_ROUTE = '/invitations/:token'
const ROLES = ['member', 'admin'] as const
const noSuchWorkspace = () => new HttpError(404, 'not_found', 'You own no workspace with that id.')
const field = (request: FastifyRequest, name: string) => (request.body as Record<string, string | undefined>)[name] ?? ''

/** The name and description of a form, or what is wrong with them. */
function workspaceFields (request: FastifyRequest): { name: string, description: string, problem?: string } {
  const name = field(request, 'workspace_name').trim()
  const description = field(request, 'description').trim()
  const problem = name === '' || name.length > 100
    ? 'The name must be 1 to 100 characters long.'
    : description.length > 500 ? 'The description may be at most 500 characters long.' : undefined
  return { name, description, problem }
}

/** An invitation whose e-mail did not leave this server: not configured (`recorded`) or refused (`failed`). */
interface Unsent { status: 'recorded' | 'failed', email: string }

const roleText = (role: WorkspaceRole) => ({ owner: 'owner', admin: 'admin: views and changes', member: 'member: views' })[role]

export interface SignIn { (request: FastifyRequest, reply: FastifyReply, userId: string, options: { viaLink: boolean, workspaceId?: string }): Promise<void> }

type Workspace = Awaited<ReturnType<typeof listWorkspaces>>[number]
type Member = Awaited<ReturnType<typeof listMembers>>[number]
type Membership = Awaited<ReturnType<typeof listMemberships>>[number]

/** The list: where the person works, the workspaces they own with their members, and the new workspace form. */
interface WorkspacesData { viewer: Viewer, email: string, current: string, memberships: Membership[], owned: Workspace[], members: Member[], error?: string, form?: FormValues }

function workspacesPage (data: WorkspacesData): string {
  const { viewer, current, memberships, owned } = data
  return layout({
    title: 'Workspaces',
    viewer,
    current: '/workspaces',
    body: html`
<h2>Where you work</h2>
<p>In your own account you see all your records. In a workspace you belong to, you see its agents, calls, deliveries and
knowledge bases: an admin changes them, a member views them.</p>
<form method="post" action="/workspace" class="stack">
  ${csrfField(viewer.csrfToken)}
  <fieldset class="plain">
    <legend>Work in</legend>
    <label class="choice"><input type="radio" name="workspace_id" value=""${current === '' && html` checked`}> Your account (${data.email})</label>
    ${memberships.map((m) => html`<label class="choice"><input type="radio" name="workspace_id" value="${m.workspaceId}"${current === m.workspaceId && html` checked`}> ${m.workspaceName} (${m.role}${m.role !== 'owner' && html` · owned by ${m.ownerEmail}`})</label>`)}
  </fieldset>
  <button type="submit">Switch</button>
</form>
<h2>Your workspaces</h2>
${dataTable({
  caption: 'Your workspaces',
  captionHidden: true,
  empty: 'You own no workspace yet. A workspace groups agents and their calls, deliveries and knowledge bases, and lets you invite people to them.',
  rows: owned,
  columns: [
    { header: 'Name', cell: (w) => html`<a href="/workspaces/${w.id}">${w.name}</a>` },
    { header: 'Description', cell: (w) => w.description },
    { header: 'Members', cell: (w) => data.members.filter((m) => m.workspace_id === w.id).length },
    { header: 'Created', cell: (w) => when(w.created_at) }
  ]
})}
<h2 id="create">Create a workspace</h2>
${data.error !== undefined && notice('error', data.error)}
<form method="post" action="/workspaces" class="stack">
  ${csrfField(viewer.csrfToken)}
  <label for="workspace_name">Name</label>
  <input id="workspace_name" name="workspace_name" maxlength="100" required value="${data.form?.workspace_name ?? ''}">
  <label for="description">Description</label>
  <input id="description" name="description" maxlength="500" value="${data.form?.description ?? ''}">
  <button type="submit">Create workspace</button>
</form>`
  })
}

/** What a change of the workspace's page did, as its redirect's query says it (Post/Redirect/Get). */
type Done = { kind: 'saved' } | { kind: 'mailed' | 'invited' | 'removed', email: string } | { kind: 'reinvited', email: string, role: typeof ROLES[number] }

/** A workspace's page: its members, invitations, settings; `done` or `error` from the last change, `unsent` an invitation whose e-mail did not leave. */
interface WorkspaceData { viewer: Viewer, workspace: Workspace, members: Member[], done?: Done, error?: string, unsent?: Unsent, form?: FormValues }

function doneText (done: Done): string {
  switch (done.kind) {
    case 'saved': return 'Saved.'
    case 'mailed': return `Invitation e-mailed to ${done.email}.`
    case 'invited': return `${done.email} is invited.`
    case 'reinvited': return `${done.email} was invited already; their role is now ${done.role}.`
    case 'removed': return `${done.email} is no longer a member.`
  }
}

function workspacePage ({ viewer, workspace, members, done, error, unsent, form = {} }: WorkspaceData): string {
  return layout({
    title: workspace.name,
    viewer,
    current: '/workspaces',
    body: html`
<p><a href="/workspaces">All workspaces</a></p>
${done !== undefined && notice('success', doneText(done))}
${unsent !== undefined && html`<section class="notice error" aria-labelledby="unsent-title">
  <h2 id="unsent-title">The invitation e-mail was not sent</h2>
  <p>${unsent.status === 'recorded' ? 'E-mail is not configured on this server (SMTP_URL is not set).' : 'The mail server refused it or could not be reached.'}
  The invitation's link goes only to ${unsent.email} by e-mail, so that only whoever holds that address can make an
  account with it. Ask the operator of this server to configure e-mail and press Send again, or to hand the person a link:</p>
  <p><code>${inviteLinkCommand(workspace.id, unsent.email)}</code></p>
</section>`}
${error !== undefined && notice('error', error)}
<h2>Members</h2>
${dataTable({
  caption: 'Members and invitations',
  captionHidden: true,
  empty: 'No members.',
  rows: members,
  columns: [
    { header: 'E-mail', cell: (m) => m.email },
    { header: 'Role', cell: (m) => roleText(m.role) },
    { header: 'Status', cell: (m) => m.status },
    { header: 'Invited', cell: (m) => when(m.invited_at) },
    { header: 'Joined', cell: (m) => when(m.joined_at) },
    {
      header: html`<span class="visually-hidden">Actions</span>`,
      cell: (m) => m.role !== 'owner' && html`<div class="actions">
      ${m.status === 'invited' && html`<form method="post" action="/workspaces/${workspace.id}/members/resend">${csrfField(viewer.csrfToken)}<input type="hidden" name="email" value="${m.email}"><button type="submit" class="link" aria-label="Send again to ${m.email}">Send again</button></form>`}
      <form method="post" action="/workspaces/${workspace.id}/members/remove">${csrfField(viewer.csrfToken)}<input type="hidden" name="email" value="${m.email}"><button type="submit" class="danger" aria-label="Remove ${m.email}">Remove</button></form>
    </div>`
    }
  ]
})}
<h2>Invite someone</h2>
<form method="post" action="/workspaces/${workspace.id}/members" class="stack">
  ${csrfField(viewer.csrfToken)}
  <label for="email">E-mail address</label>
  <input id="email" name="email" type="email" maxlength="254" required value="${form.email ?? ''}">
  <label for="role">Role</label>
  <select id="role" name="role">${ROLES.map((role) => html`<option value="${role}"${form.role === role && html` selected`}>${roleText(role)}</option>`)}</select>
  <button type="submit">Invite</button>
</form>
<h2>Settings</h2>
<form method="post" action="/workspaces/${workspace.id}" class="stack">
  ${csrfField(viewer.csrfToken)}
  <label for="workspace_name">Name</label>
  <input id="workspace_name" name="workspace_name" maxlength="100" required value="${form.workspace_name ?? workspace.name}">
  <label for="description">Description</label>
  <input id="description" name="description" maxlength="500" value="${form.description ?? workspace.description}">
  <button type="submit">Save</button>
</form>
<h2>Delete the workspace</h2>
<p>Its members lose it. Records that still belong to it must be deleted or moved first.</p>
<form method="post" action="/workspaces/${workspace.id}/delete">${csrfField(viewer.csrfToken)}<button type="submit" class="danger">Delete ${workspace.name}</button></form>
<p class="hint">Workspace id <code>${workspace.id}</code>.</p>`
  })
}

/** The invitation's page: who invited whom; a new person's password form, an account's Accept button, or whom to sign in as. */
interface InvitationData { viewer: Viewer | undefined, session: ConsoleSession | undefined, action: string, invitation: Invitation, hasAccount: boolean, accountSignedIn: boolean, csrfToken: string, error?: string }

function invitationPage ({ viewer, session, action, invitation, hasAccount, accountSignedIn, csrfToken, error }: InvitationData): string {
  const who = html`<p><strong>${invitation.ownerEmail}</strong> invited <strong>${invitation.email}</strong> to the workspace
<strong>${invitation.workspaceName}</strong> as ${invitation.role === 'admin' ? 'an admin (views and changes its agents, calls, deliveries and knowledge bases)' : 'a member (views its agents, calls, deliveries and knowledge bases)'}.</p>`
  let body
  if (!hasAccount) {
    body = html`${who}${error !== undefined && notice('error', error)}
<p>Choose a password for your new account; you sign in with ${invitation.email} and it.</p>
<form method="post" action="${action}" class="stack">
  ${csrfField(csrfToken)}
  <input type="text" name="username" autocomplete="username" value="${invitation.email}" hidden>
  <label for="new">Password</label>
  <input id="new" name="new_password" type="password" autocomplete="new-password" minlength="${MIN_PASSWORD_LENGTH}" required aria-describedby="new-hint">
  <p id="new-hint" class="hint">At least ${MIN_PASSWORD_LENGTH} characters.</p>
  <label for="confirm">Password again</label>
  <input id="confirm" name="confirm_password" type="password" autocomplete="new-password" required>
  <button type="submit">Accept and create my account</button>
</form>`
  } else if (accountSignedIn) {
    body = html`${who}${error !== undefined && notice('error', error)}
<form method="post" action="${action}">${csrfField(csrfToken)}<button type="submit">Accept the invitation</button></form>`
  } else {
    body = html`${who}
${session !== undefined && html`<p>You are signed in as ${session.email}. Sign out first, then open the link again.</p>`}
<p>${invitation.email} has an account on this server: <a href="/login?next=${encodeURIComponent(action)}">sign in as ${invitation.email}</a> to accept.</p>`
  }
  return layout({ title: 'Invitation', viewer, body })
}

const WorkspaceForm = formBody({ workspace_name: text('The name'), description: text('The description') })
const MemberForm = formBody({ email: text('The e-mail address') })
// What the workspace page's redirect after a change carries (Done).
const DoneQuery = Type.Object({ done: text('The outcome'), email: text('The e-mail address'), role: text('The role'), unsent: text('The e-mail\'s fate'), draft: DRAFT_QUERY })
type DoneQuery = Static<typeof DoneQuery>
// An invitation's token in its link (wi_ and base64url; an unknown one is the dead link's 404).
const InvitationParams = Type.Object({ token: Type.String() })

/** The redirect's query of a change's outcome. */
function doneQuery (done: Done, unsent?: Unsent['status']): string {
  const query = new URLSearchParams({ done: done.kind })
  if (done.kind !== 'saved') query.set('email', done.email)
  if (done.kind === 'reinvited') query.set('role', done.role)
  if (unsent !== undefined) query.set('unsent', unsent)
  return query.toString()
}

/**
 * The outcome a redirect's query names, when the members agree with it (a made-up address shows nothing): an
 * invitation's outcomes name an open invitation, a removal an address that is no member.
 */
function doneOf (query: DoneQuery, members: Member[]): { done?: Done, unsent?: Unsent } {
  const { done, email = '', role, unsent } = query
  if (done === 'saved') return { done: { kind: done } }
  const invited = members.some((m) => m.email === email && m.status === 'invited')
  if ((done === 'mailed' || done === 'invited') && invited) {
    return { done: { kind: done, email }, unsent: done === 'invited' && (unsent === 'recorded' || unsent === 'failed') ? { status: unsent, email } : undefined }
  }
  if (done === 'reinvited' && invited && (role === 'member' || role === 'admin')) return { done: { kind: done, email, role } }
  if (done === 'removed' && email !== '' && !members.some((m) => m.email === email)) return { done: { kind: done, email } }
  return {}
}

export async function consoleWorkspaceRoutes (app: FastifyInstance, options: { db: DB, mailer: Mailer, publicBaseUrl: string, signIn: SignIn }): Promise<void> {
  const { db, mailer, publicBaseUrl, signIn } = options
  const secure = publicBaseUrl.startsWith('https:')

  async function workspacesData (session: ConsoleSession): Promise<WorkspacesData> {
    const [memberships, owned] = await Promise.all([listMemberships(db, session.userId), listWorkspaces(db, session.userId, { limit: 100 })])
    const members = await listMembers(db, owned.map((w) => w.id))
    return { viewer: viewerOf(session), email: session.email, current: session.workspace?.id ?? '', memberships, owned, members }
  }

  async function workspaceData (session: ConsoleSession, id: string): Promise<WorkspaceData> {
    const workspace = await requireOwned(session, id)
    return { viewer: viewerOf(session), workspace, members: await listMembers(db, [workspace.id]) }
  }

  /** Workspaces are managed by their owner only: anyone else's id is a 404, as in the API. */
  async function requireOwned (session: ConsoleSession, id: string) {
    try {
      return await requireWorkspace(db, session.userId, id.toLowerCase())
    } catch (err) {
      if (err instanceof HttpError && err.statusCode === 404) throw noSuchWorkspace()
      throw err
    }
  }

  /**
   * A change of the workspace: its outcome is said on the page it redirects to; a refusal (an HttpError of the
   * workspaces' functions) is a draft of the workspace's page (drafts.ts) with its message and the fields of `form`.
   */
  async function outcome (reply: FastifyReply, session: ConsoleSession, id: string, form: FormValues, change: (workspace: { id: string, name: string }) => Promise<{ done: Done, unsent?: Unsent['status'] }>) {
    const workspace = await requireOwned(session, id)
    const path = `/workspaces/${workspace.id}`
    try {
      const { done, unsent } = await change(workspace)
      await formSaved(db, session, path)
      return reply.redirect(`${path}?${doneQuery(done, unsent)}`, 303)
    } catch (err) {
      if (!(err instanceof HttpError) || err.statusCode >= 500 || err.statusCode === 404) throw err
      return await refuseForm(db, reply, session, path, form, { [FORM_PROBLEM]: `${err.message[0].toUpperCase()}${err.message.slice(1)}.` }, 'main')
    }
  }

  app.get<{ Querystring: { draft?: string } }>('/workspaces', page({ querystring: Type.Object({ draft: DRAFT_QUERY }) }), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const draft = await draftOf(db, session, '/workspaces', request.query.draft)
    return sendPage(reply, 200, workspacesPage({ ...await workspacesData(session), error: draft?.problems[FORM_PROBLEM], form: draft?.values }))
  })

  app.post('/workspaces', page({ body: WorkspaceForm }), async (request, reply) => {
    const session = request.consoleSession!
    const { name, description, problem } = workspaceFields(request)
    if (problem !== undefined) return await refuseForm(db, reply, session, '/workspaces', { workspace_name: name, description }, { [FORM_PROBLEM]: problem }, 'create')
    const workspace = await createWorkspace(db, session.userId, { name, description })
    await formSaved(db, session, '/workspaces')
    return reply.redirect(`/workspaces/${workspace.id}`, 303)
  })

  app.post('/workspace', page({ body: formBody({ workspace_id: text('The workspace') }) }), async (request, reply) => {
    const session = request.consoleSession!
    const id = field(request, 'workspace_id').toLowerCase()
    if (id !== '' && !(await listMemberships(db, session.userId)).some((m) => m.workspaceId === id)) {
      throw new HttpError(404, 'not_found', 'You are not a member of that workspace (any more).')
    }
    await setSessionWorkspace(db, session.idHash, id === '' ? null : id)
    return reply.redirect(HOME, 303)
  })

  app.get<{ Params: { id: string }, Querystring: DoneQuery }>('/workspaces/:id', page({ params: idParams('id'), querystring: DoneQuery }), async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const data = await workspaceData(session, request.params.id)
    const draft = await draftOf(db, session, `/workspaces/${data.workspace.id}`, request.query.draft)
    return sendPage(reply, 200, workspacePage({ ...data, ...doneOf(request.query, data.members), error: draft?.problems[FORM_PROBLEM], form: draft?.values }))
  })

  app.post<{ Params: { id: string } }>('/workspaces/:id', page({ params: idParams('id'), body: WorkspaceForm }), async (request, reply) => {
    const session = request.consoleSession!
    const { name, description, problem } = workspaceFields(request)
    return await outcome(reply, session, request.params.id, { workspace_name: name, description }, async (workspace) => {
      if (problem !== undefined) throw new HttpError(400, 'validation_error', problem.replace(/\.$/, ''))
      await updateWorkspace(db, session.userId, workspace.id, { name, description })
      return { done: { kind: 'saved' } }
    })
  })

  app.post<{ Params: { id: string } }>('/workspaces/:id/delete', page({ params: idParams('id'), body: formBody({}) }), async (request, reply) => {
    const session = request.consoleSession!
    const id = (await requireOwned(session, request.params.id)).id
    try {
      await deleteWorkspace(db, session.userId, id)
    } catch (err) {
      if (err instanceof HttpError && err.statusCode === 409) return await refuseForm(db, reply, session, `/workspaces/${id}`, {}, { [FORM_PROBLEM]: `Not deleted: ${err.message}.` }, 'main')
      throw err
    }
    return reply.redirect('/workspaces', 303)
  })

  app.post<{ Params: { id: string } }>('/workspaces/:id/members', page({ params: idParams('id'), body: formBody({ email: text('The e-mail address'), role: text('The role') }) }), async (request, reply) => {
    const session = request.consoleSession!
    const email = field(request, 'email').trim().toLowerCase()
    const role = field(request, 'role')
    return await outcome(reply, session, request.params.id, { email, role }, async (workspace) => {
      if (email.length > 254 || !EMAIL.test(email)) throw new HttpError(400, 'validation_error', 'the e-mail address is not valid')
      if (!(ROLES as readonly string[]).includes(role)) throw new HttpError(400, 'validation_error', 'choose the role member or admin')
      const invitation = await inviteMember(db, session.userId, workspace.id, email, role as typeof ROLES[number])
      if (!invitation.invited) return { done: { kind: 'reinvited', email, role: role as typeof ROLES[number] } }
      return await mailed(session, workspace, email, role as typeof ROLES[number], invitation.token)
    })
  })

  /**
   * Sends the invitation. The link never reaches the inviter, not even when no e-mail left this server: whoever
   * holds the link makes the account, so only the address's holder (or the operator, with the CLI) may have it.
   */
  async function mailed (session: ConsoleSession, workspace: { id: string, name: string }, email: string, role: 'admin' | 'member', token: string): Promise<{ done: Done, unsent?: Unsent['status'] }> {
    const status = await sendInvitation(mailer, publicBaseUrl, { userId: session.userId, workspaceId: workspace.id, workspaceName: workspace.name, inviter: session.email, email, role, token })
    return status === 'sent' ? { done: { kind: 'mailed', email } } : { done: { kind: 'invited', email }, unsent: status }
  }

  app.post<{ Params: { id: string } }>('/workspaces/:id/members/resend', page({ params: idParams('id'), body: MemberForm }), async (request, reply) => {
    const session = request.consoleSession!
    const email = field(request, 'email').toLowerCase()
    return await outcome(reply, session, request.params.id, {}, async (workspace) => {
      const member = (await listMembers(db, [workspace.id])).find((m) => m.email === email && m.status === 'invited')
      const token = member === undefined ? undefined : await renewInvitation(db, session.userId, workspace.id, email)
      if (member === undefined || token === undefined) throw new HttpError(409, 'conflict', `${email} has no open invitation to this workspace`)
      return await mailed(session, workspace, email, member.role === 'admin' ? 'admin' : 'member', token)
    })
  })

  app.post<{ Params: { id: string } }>('/workspaces/:id/members/remove', page({ params: idParams('id'), body: MemberForm }), async (request, reply) => {
    const session = request.consoleSession!
    const email = field(request, 'email').toLowerCase()
    return await outcome(reply, session, request.params.id, {}, async (workspace) => {
      try {
        await removeMember(db, session.userId, workspace.id, email)
      } catch (err) {
        if (err instanceof HttpError && err.statusCode === 404) throw new HttpError(409, 'conflict', `${email} is not a member of this workspace`)
        throw err
      }
      return { done: { kind: 'removed', email } }
    })
  })

  // The invitation e-mail's link. A new person chooses a password here: opening the e-mail's link proves the address,
  // and the account is made only then. An existing account must be signed in to accept, so that whoever else sees the
  // link (a mail scanner, the operator who issued it) cannot take that account over.

  const invitationTokenCookie = (request: FastifyRequest, reply: FastifyReply) => {
    const token = parseCookies(request.headers.cookie).get(LOGIN_CSRF_COOKIE) ?? newSecret()
    reply.header('set-cookie', serializeCookie(LOGIN_CSRF_COOKIE, token, { path: '/invitations', secure }))
    return token
  }

  /** The invitation's page: for a new person, the form's CSRF token is the session's or a cookie's (set here). */
  async function sendInvitationPage (request: FastifyRequest, reply: FastifyReply, status: number, token: string, invitation: Invitation, error?: string) {
    const session = request.consoleSession
    const account = await findUser(db, invitation.email)
    const accountSignedIn = account !== undefined && session?.userId === account.id
    const csrfToken = account === undefined ? session?.csrfToken ?? invitationTokenCookie(request, reply) : session?.csrfToken ?? ''
    return sendPage(reply, status, invitationPage({
      viewer: session && viewerOf(session), session, action: `/invitations/${encodeURIComponent(token)}`, invitation, hasAccount: account !== undefined, accountSignedIn, csrfToken, error
    }))
  }

  const deadLink = () => new HttpError(404, 'not_found', 'This invitation link does not work: it was used already, withdrawn, or is older than 7 days. Ask the workspace\'s owner to send it again.')

  app.get<{ Params: { token: string } }>(INVITATION_ROUTE, page({ params: InvitationParams }, { config: KEYLESS }), async (request, reply) => {
    const invitation = await findInvitation(db, request.params.token)
    if (invitation === undefined) throw deadLink()
    return await sendInvitationPage(request, reply, 200, request.params.token, invitation)
  })

  app.post<{ Params: { token: string } }>(INVITATION_ROUTE, page({ params: InvitationParams, body: formBody({ username: text('The e-mail address'), new_password: text('The password'), confirm_password: text('The password again') }) }, { config: KEYLESS }), async (request, reply) => {
    const { token } = request.params
    const invitation = await findInvitation(db, token)
    if (invitation === undefined) throw deadLink()
    const account = await findUser(db, invitation.email)
    const session = request.consoleSession
    if (account !== undefined) {
      if (session?.userId !== account.id) return await sendInvitationPage(request, reply, 403, token, invitation)
      const workspaceId = await acceptInvitationLink(db, token, account.id)
      if (workspaceId === undefined) throw deadLink()
      await setSessionWorkspace(db, session.idHash, workspaceId)
      return reply.redirect(HOME, 303)
    }
    const password = field(request, 'new_password')
    const problem = passwordProblem(password) ?? (password !== field(request, 'confirm_password') ? 'The two passwords differ.' : undefined)
    if (problem !== undefined) return await sendInvitationPage(request, reply, 400, token, invitation, problem)
    const passwordHash = await hashPassword(password)
    const userId = await db.transaction().execute(async (trx) => {
      const user = await createUser(trx, { email: invitation.email })
      await trx.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', user.id).execute()
      // The link works once: a second click (or a race) finds it spent, and the new account is not kept.
      if (await acceptInvitationLink(trx, token, user.id) === undefined) throw deadLink()
      return user.id
    })
    await signIn(request, reply, userId, { viaLink: false, workspaceId: invitation.workspaceId })
    reply.header('set-cookie', serializeCookie(LOGIN_CSRF_COOKIE, '', { path: '/invitations', maxAgeSeconds: 0, secure }))
    return reply.redirect(HOME, 303)
  })
}
