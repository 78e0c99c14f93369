import type { FastifyRequest } from 'fastify'
import type { TSchema } from 'typebox'
import { invalidInput, type AjvIssue } from '../../http/errors.ts'
import { compileBodySchema } from '../../http/validation.ts'
import { html, type SafeHtml } from './html.ts'
import { notice } from './pages.ts'

// What the account pages' forms share: reading fields, checking each with the API's schema, and rendering an
// input with its label, hint and problem (tied to it by aria-describedby and aria-invalid).

export type Problems = Record<string, string | undefined>

/** The named fields of the posted form (or of a GET form's query), '' for a missing or repeated one. */
export function formFields<F extends string> (source: unknown, names: readonly F[]): Record<F, string> {
  const values = (source ?? {}) as Record<string, unknown>
  return Object.fromEntries(names.map((name) => [name, typeof values[name] === 'string' ? values[name].trim() : ''])) as Record<F, string>
}

export const formOf = <F extends string>(request: FastifyRequest, names: readonly F[]) => formFields(request.body, names)

/**
 * A check of one field by the schema the API checks it with: undefined when the value passes, else the
 * sentence to show under the field (`message` replaces the schema's wording where it would puzzle a person).
 */
export function fieldCheck (label: string, schema: TSchema, message?: string): (value: unknown) => string | undefined {
  const validate = compileBodySchema(schema)
  return (value) => {
    if (validate(value)) return undefined
    if (message !== undefined) return message
    return value === '' ? `${label} is required.` : `${invalidInput(label, validate.errors![0] as AjvIssue).message}.`
  }
}

/** A whole number as a number (so that the schema sees its range), anything else as the text it is. */
export const integerOf = (text: string): number | string => /^-?\d{1,15}$/.test(text) ? Number(text) : text

/** The problem of a day filter (`from`, `to`) that http/dates.ts's calendarDay does not read as a day. */
export const notADay = (label: string) => `“${label}” must be a calendar day written YYYY-MM-DD, from 0001-01-01.`

export const hasProblems = (problems: Problems) => Object.values(problems).some((problem) => problem !== undefined)

export const problemsNotice = (problems: Problems) =>
  hasProblems(problems) && notice('error', 'Some fields need another look: see the messages below them.')

interface FieldOptions {
  /** The input's name; its id is `${prefix}${name}` so that two forms of one page may share names. */
  name: string
  label: string
  value: string
  problems: Problems
  hint?: string
  prefix?: string
  /** Extra attributes (type, maxlength, required …), written by this code. */
  attrs?: SafeHtml
}

/**
 * How the control `id` tells its hint and its problem: the attributes for the control (aria-describedby,
 * aria-invalid) and the paragraphs to put after it, with the ids those attributes name. Every console form uses it.
 */
export function describe (id: string, hint: string | undefined, problem: string | undefined): { attrs: SafeHtml, after: SafeHtml } {
  const ids = [hint !== undefined && `${id}-hint`, problem !== undefined && `${id}-error`].filter(Boolean).join(' ')
  return {
    attrs: html`${ids !== '' && html` aria-describedby="${ids}"`}${problem !== undefined && html` aria-invalid="true"`}`,
    after: html`${hint !== undefined && html`<p id="${id}-hint" class="hint">${hint}</p>`}
  ${problem !== undefined && html`<p id="${id}-error" class="field-error">${problem}</p>`}`
  }
}

const described = ({ name, hint, problems, prefix = '' }: FieldOptions) => describe(prefix + name, hint, problems[name])

export function inputField (options: FieldOptions): SafeHtml {
  const { attrs, after } = described(options)
  const id = (options.prefix ?? '') + options.name
  return html`<label for="${id}">${options.label}</label>
  <input id="${id}" name="${options.name}" value="${options.value}"${options.attrs}${attrs}>
  ${after}`
}

export function selectField (options: FieldOptions & { choices: Array<{ value: string, label: string }> }): SafeHtml {
  const { attrs, after } = described(options)
  const id = (options.prefix ?? '') + options.name
  return html`<label for="${id}">${options.label}</label>
  <select id="${id}" name="${options.name}"${options.attrs}${attrs}>
    ${options.choices.map((choice) => html`<option value="${choice.value}"${choice.value === options.value && html` selected`}>${choice.label}</option>`)}
  </select>
  ${after}`
}

export function textareaField (options: FieldOptions): SafeHtml {
  const { attrs, after } = described(options)
  const id = (options.prefix ?? '') + options.name
  // The text starts after a line break, which the HTML parser drops, so that text starting with one keeps it.
  return html`<label for="${id}">${options.label}</label>
  <textarea id="${id}" name="${options.name}"${options.attrs}${attrs}>
${options.value}</textarea>
  ${after}`
}
