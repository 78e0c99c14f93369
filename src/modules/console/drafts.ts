import type { FastifyReply } from 'fastify'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import type { FormValues, Problems } from './forms.ts'
import { deleteDraft, findDraft, putDraft, type ConsoleSession } from './queries.ts'

// Post/Redirect/Get for a refused form. A POST never answers with a page at its own address: a refused form's
// values and problems are kept for the session (console_drafts) and the POST redirects (303) to the form's page
// with `?draft=<id>`; that page shows the draft instead of the stored record. A reload shows it again and never
// resubmits; another session, or another page, cannot read it. Usage:
//
//   POST: if (problems) return await refuseForm(db, reply, session, `/agents/${id}`, form, problems)
//         ... save ...; await formSaved(db, session, `/agents/${id}`)
//   GET:  const draft = await draftOf(db, session, `/agents/${id}`, request.query.draft)
//         render(draft?.values ?? storedValues, draft?.problems ?? {})
//
// The page's querystring schema lists `draft` (with DRAFT_PATTERN). A refusal about no field (a delete refused because
// records still name the record) is a draft whose problem has the key FORM_PROBLEM: errorSummary says it first, or a
// page without a summary shows it beside the form's button.

/** The id a draft's address carries. */
export const DRAFT_PARAM = 'draft'
/** The querystring member of a page that shows drafts (its schema's `draft`). */
export const DRAFT_PATTERN = '^[0-9a-f]{24}$'
/** A page's `draft` query parameter, for its querystring schema. */
export const DRAFT_QUERY = Type.Optional(Type.String({ title: 'The draft', pattern: DRAFT_PATTERN }))
/** The key of a problem that is about the whole form, not one field (errorSummary says it first, without a link). */
export const FORM_PROBLEM = ''

/**
 * Keeps the refused form (without its CSRF token) and redirects to `path`, which shows it; `anchor` is the fragment the
 * page opens at. A problem under FORM_PROBLEM is the form's own (not one field's); an undefined one is no problem.
 */
export async function refuseForm (db: DB, reply: FastifyReply, session: ConsoleSession, path: string, form: FormValues, problems: Record<string, string | undefined>, anchor = 'form-problems'): Promise<FastifyReply> {
  // PostgreSQL's text cannot hold NUL: shown as U+FFFD (its problem says what was wrong).
  const storable = (text: string) => text.replaceAll('\u0000', '\uFFFD')
  const values: Record<string, string> = {}
  for (const [name, value] of Object.entries(form)) if (value !== undefined && name !== 'csrf_token') values[storable(name)] = storable(value)
  const id = newId()
  await putDraft(db, { id, sessionHash: session.idHash, path, values, problems: Object.fromEntries(Object.entries(problems).flatMap(([name, text]) => text === undefined ? [] : [[storable(name), storable(text)]])) })
  return await reply.redirect(`${path}${path.includes('?') ? '&' : '?'}${DRAFT_PARAM}=${id}#${anchor}`, 303)
}

/** The draft the page's address names, when it belongs to this session and this page; otherwise undefined (the stored record is shown). */
export async function draftOf (db: DB, session: ConsoleSession, path: string, id: string | undefined): Promise<{ values: FormValues, problems: Problems } | undefined> {
  if (id === undefined || !new RegExp(DRAFT_PATTERN).test(id)) return undefined
  return await findDraft(db, session.idHash, path, id)
}

/** The form at `path` was saved: its draft goes (an old `?draft=` address then shows the saved record). */
export async function formSaved (db: DB, session: ConsoleSession, path: string): Promise<void> {
  await deleteDraft(db, session.idHash, path)
}
