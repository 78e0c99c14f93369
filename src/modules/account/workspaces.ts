import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Selectable } from 'kysely'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import type { WorkspacesTable } from '../../db/schema.ts'
import { badRequest } from '../../http/errors.ts'
import { AUTH_ERRORS, COMPONENT, Email, EpochMs, errors, ObjectId, Paging } from '../../http/schemas.ts'
import type { Mailer, MailStatus } from '../../mail/mailer.ts'
import {
  acceptInvitation, createWorkspace, deleteWorkspace, inviteMember, listMembers, listWorkspaces, removeMember,
  requireWorkspace, updateWorkspace
} from './workspace-queries.ts'

const WorkspaceName = Type.String({ minLength: 1, maxLength: 100 })
const Description = Type.String({ maxLength: 500 })
const InvitedRole = Type.Enum(['admin', 'member'], { default: 'member', description: 'admins manage the workspace; members use it' })

const Member = Type.Object({
  email: Email,
  role: Type.Enum(['owner', 'admin', 'member']),
  status: Type.Enum(['invited', 'active'], { description: '`invited` until the person accepts with their own API key' }),
  invited_at: EpochMs,
  joined_at: Type.Union([EpochMs, Type.Null()])
}, { [COMPONENT]: 'WorkspaceMember' })

const Workspace = Type.Object({
  _id: ObjectId,
  workspace_name: WorkspaceName,
  description: Description,
  members: Type.Array(Member, { description: 'the owner first, then by invitation time' }),
  created_at: EpochMs,
  updated_at: EpochMs
}, { [COMPONENT]: 'Workspace' })

const WorkspaceParams = Type.Object({ workspace_id: ObjectId })

interface MemberRow { workspace_id: string, email: string, role: 'owner' | 'admin' | 'member', status: 'invited' | 'active', invited_at: Date, joined_at: Date | null }

function memberView (m: MemberRow) {
  return { email: m.email, role: m.role, status: m.status, invited_at: m.invited_at.getTime(), joined_at: m.joined_at?.getTime() ?? null }
}

function workspaceView (w: Selectable<WorkspacesTable>, members: MemberRow[]) {
  return {
    _id: w.id,
    workspace_name: w.name,
    description: w.description,
    members: members.filter((m) => m.workspace_id === w.id).map(memberView),
    created_at: w.created_at.getTime(),
    updated_at: w.updated_at.getTime()
  }
}

async function withMembers (db: DB, workspace: Selectable<WorkspacesTable>) {
  return workspaceView(workspace, await listMembers(db, [workspace.id]))
}

export interface InvitationMail { userId: string, workspaceId: string, workspaceName: string, inviter: string, email: string, role: 'admin' | 'member', token: string }

/** The link of an invitation: the console's page that accepts it. */
export const publicInvitationUrl = (publicBaseUrl: string, token: string) => `${publicBaseUrl}/invitations/${token}`

/** The invitation e-mail: a link to the console (a password for a new person), or the API's accept route. */
export async function sendInvitation (mailer: Mailer, publicBaseUrl: string, invitation: InvitationMail): Promise<MailStatus> {
  const { workspaceId, workspaceName, inviter, email, role } = invitation
  const { status } = await mailer.sendMail({
    userId: invitation.userId,
    kind: 'workspace_invitation',
    to: email,
    subject: `You are invited to the workspace "${workspaceName}"`,
    text: [
      `${inviter} invited you to the Switchboard workspace "${workspaceName}" as ${role === 'admin' ? 'an admin' : 'a member'}.`,
      '',
      'To accept, open this link (it works once, for 7 days); if you are new to this server, you choose a password there:',
      publicInvitationUrl(publicBaseUrl, invitation.token),
      '',
      `With the API instead: POST /v1/workspaces/${workspaceId}/accept-invitation with the API key of your own`,
      `Switchboard account registered with ${email}.`
    ].join('\n')
  })
  return status
}

/**
 * The operator's command that prints a new link of an open invitation (scripts/cli.ts), for an invitation whose
 * e-mail could not be sent: the link itself is never shown to the inviter.
 */
export const inviteLinkCommand = (workspaceId: string, email: string) => `npm run cli -- workspace invite-link --workspace ${workspaceId} --email ${email}`

export const workspaceRoutes: FastifyPluginAsyncTypebox<{ db: DB, mailer: Mailer, publicBaseUrl: string }> = async (app, { db, mailer, publicBaseUrl }) => {
  app.get('/workspaces/list', {
    schema: {
      tags: ['workspaces'],
      summary: 'List workspaces',
      description: 'Oldest first, each with its members.',
      querystring: Type.Object(Paging),
      response: { 200: Type.Array(Workspace), ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => {
    const workspaces = await listWorkspaces(db, request.userId, request.query)
    const members = await listMembers(db, workspaces.map((w) => w.id))
    return workspaces.map((w) => workspaceView(w, members))
  })

  app.post('/workspaces', {
    schema: {
      tags: ['workspaces'],
      summary: 'Create a workspace',
      description: 'The account owner becomes its first member, with role `owner`.',
      body: Type.Object({ workspace_name: WorkspaceName, description: Type.Optional(Description) }),
      response: { 201: Workspace, ...errors(...AUTH_ERRORS) }
    }
  }, async (request, reply) => {
    const workspace = await createWorkspace(db, request.userId, { name: request.body.workspace_name, description: request.body.description })
    return reply.code(201).send(await withMembers(db, workspace))
  })

  app.get('/workspaces/:id', {
    schema: {
      tags: ['workspaces'],
      summary: 'Get a workspace',
      params: Type.Object({ id: ObjectId }),
      response: { 200: Workspace, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => await withMembers(db, await requireWorkspace(db, request.userId, request.params.id)))

  app.patch('/workspaces/:id', {
    schema: {
      tags: ['workspaces'],
      summary: 'Update a workspace',
      params: Type.Object({ id: ObjectId }),
      body: Type.Object({ workspace_name: Type.Optional(WorkspaceName), description: Type.Optional(Description) }),
      response: { 200: Workspace, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const workspace = await updateWorkspace(db, request.userId, request.params.id, { name: request.body.workspace_name, description: request.body.description })
    return await withMembers(db, workspace)
  })

  app.delete('/workspaces/:id', {
    schema: {
      tags: ['workspaces'],
      summary: 'Delete a workspace',
      description: 'Its members go with it. Refused with 409 `workspace_in_use`, naming them, while records (such as phone numbers) still belong to the workspace.',
      params: Type.Object({ id: ObjectId }),
      response: { 204: Type.Null(), ...errors(...AUTH_ERRORS, 404, 409) }
    }
  }, async (request, reply) => {
    await deleteWorkspace(db, request.userId, request.params.id)
    return reply.code(204).send(null)
  })

  app.post('/workspaces/:workspace_id/invite-member', {
    schema: {
      tags: ['workspaces'],
      summary: 'Invite a member',
      description: 'A new invitation answers 201 and sends an invitation e-mail, whose link alone makes a new account: it is never in an answer. Without SMTP (or when the mail server refuses it) the operator issues the link with `npm run cli -- workspace invite-link`. Inviting the same address again answers 200 and sends nothing; a different `role` replaces the earlier one.',
      params: WorkspaceParams,
      body: Type.Object({ email: Email, role: Type.Optional(InvitedRole) }),
      response: { 200: Workspace, 201: Workspace, ...errors(...AUTH_ERRORS, 404, 409) }
    }
  }, async (request, reply) => {
    const { workspace_id: workspaceId } = request.params
    const email = request.body.email.toLowerCase()
    const role = request.body.role ?? 'member'
    const invitation = await inviteMember(db, request.userId, workspaceId, email, role)
    const workspace = await withMembers(db, await requireWorkspace(db, request.userId, workspaceId))
    if (!invitation.invited) return reply.code(200).send(workspace)
    const inviter = workspace.members.find((m) => m.role === 'owner')?.email ?? 'the workspace owner'
    const status = await sendInvitation(mailer, publicBaseUrl, { userId: request.userId, workspaceId, workspaceName: workspace.workspace_name, inviter, email, role, token: invitation.token })
    // The answer never carries the link (only the invited address may receive it); the operator can issue one.
    if (status !== 'sent') request.log.warn({ workspaceId, status }, `invitation e-mail not sent; the operator can issue its link: ${inviteLinkCommand(workspaceId, '<address>')}`)
    return reply.code(201).send(workspace)
  })

  app.delete('/workspaces/:workspace_id/remove-member', {
    schema: {
      tags: ['workspaces'],
      summary: 'Remove a member',
      description: 'The address goes in the JSON body or in the query (`?email=`). An invitation not yet accepted is withdrawn the same way. The owner cannot be removed (409).',
      params: WorkspaceParams,
      querystring: Type.Object({ email: Type.Optional(Email) }),
      body: Type.Union([Type.Object({ email: Type.Optional(Email) }), Type.Null()]),
      response: { 200: Workspace, ...errors(...AUTH_ERRORS, 404, 409) }
    }
  }, async (request) => {
    const email = request.body?.email ?? request.query.email
    if (email === undefined) throw badRequest('email is required, in the body or the query')
    await removeMember(db, request.userId, request.params.workspace_id, email.toLowerCase())
    return await withMembers(db, await requireWorkspace(db, request.userId, request.params.workspace_id))
  })

  app.post('/workspaces/:workspace_id/accept-invitation', {
    schema: {
      tags: ['workspaces'],
      summary: 'Accept an invitation',
      description: "Called by the invited person with their own API key; the invitation must be addressed to that account's e-mail. Accepting again answers the same membership.",
      params: WorkspaceParams,
      response: {
        200: Type.Object({ workspace_id: ObjectId, workspace_name: WorkspaceName, ...Member.properties }),
        ...errors(...AUTH_ERRORS, 404)
      }
    }
  }, async (request) => {
    const member = await acceptInvitation(db, request.userId, request.params.workspace_id)
    return { workspace_id: member.workspace_id, workspace_name: member.workspace_name, ...memberView({ ...member, workspace_id: member.workspace_id }) }
  })
}
