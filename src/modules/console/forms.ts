import type { ValidateFunction } from 'ajv'
import type { TSchema } from 'typebox'
import { invalidInput, type AjvIssue } from '../../http/errors.ts'
import { EMAIL_PATTERN } from '../../http/schemas.ts'
import { compileBodySchema } from '../../http/validation.ts'
import { describe } from './fields.ts'
import { html, type SafeHtml } from './html.ts'

// Forms drawn from the API's TypeBox schemas: each member of an object schema becomes a labelled control, and
// what comes back is checked by the same schema, so that the console accepts exactly what the API accepts.
// Every value travels as the text of a form field (FormValues) both ways: stored records are turned into that
// text to be shown, and a refused form is shown again with the text that was sent.

/** A form's fields by name, as sent or as shown; a name that is missing was not in the form. */
export type FormValues = Record<string, string | undefined>
/** What is wrong, by field name. */
export type Problems = Record<string, string>

export interface Option { value: string, label: string }

export interface Field {
  /** The control's name, e.g. `call_settings.reminder_max_count`; its id is the name with dashes for dots. */
  name: string
  /** The schema member it fills. */
  key: string
  label: string
  schema: TSchema
  /** Empty is refused; otherwise empty means null (the member's default, or "none" where null is allowed). */
  required: boolean
  hint?: string
  /** Choices known only at run time (the account's agents): a select, or checkboxes for an array. */
  options?: Option[]
  /** A textarea, whatever the schema's length. */
  multiline?: boolean
  /** An enumeration's values in words, by value (`server_vad` → "Voice activity"); others are shown as WORDS says. */
  valueLabels?: Record<string, string>
  /** A select's empty choice, when "None (the default)" or "Choose one" would not say what it means. */
  empty?: string
}

export interface FieldOptions {
  labels?: Record<string, string>
  hints?: Record<string, string>
  options?: Record<string, Option[]>
  /** Only these members; and members left out (drawn by hand, or not editable here). */
  only?: readonly string[]
  omit?: readonly string[]
  /** Members that may not be empty although the schema has them optional (the form shows their effective value). */
  required?: readonly string[] | 'all'
  multiline?: readonly string[]
  /** By member: its enumeration's values in words. */
  values?: Record<string, Record<string, string>>
  /** By member: the label of its select's empty choice. */
  empty?: Record<string, string>
}

type Schema = TSchema & {
  type?: string, anyOf?: Schema[], enum?: unknown[], const?: unknown, items?: Schema, properties?: Record<string, Schema>,
  required?: string[], maxLength?: number, minimum?: number, maximum?: number, format?: string, pattern?: string, minItems?: number, description?: string
}

/** Text over this length gets a textarea. */
const LONG_TEXT = 1000
/** More rows than any schema allows (50 headers, 50 fields): what a form may claim to hold. */
const MAX_ROWS = 60

export const idOf = (name: string) => name.replaceAll('.', '-')

/** An enumeration's value made of words (`no_answer`, `leave_message`) is shown as words; a name such as `gpt-4o` as it is. */
const WORDS = /^[a-z]+(_[a-z]+)*$/

/** `max_call_duration_minutes` → "Max call duration minutes". */
const humanize = (key: string) => key.charAt(0).toUpperCase() + key.slice(1).replaceAll('_', ' ')

/** "Name" → "The name", "URL" stays "The URL". */
export const the = (label: string) => `The ${/^[A-Z][a-z]/.test(label) ? label.charAt(0).toLowerCase() + label.slice(1) : label}`

/** The schema without its null branch, and whether null is allowed. */
function unwrap (schema: Schema): { base: Schema, nullable: boolean } {
  const branches = schema.anyOf
  if (branches === undefined || !branches.some((branch) => branch.type === 'null')) return { base: schema, nullable: false }
  const rest = branches.filter((branch) => branch.type !== 'null')
  return { base: rest.length === 1 ? rest[0] : { ...schema, anyOf: rest }, nullable: true }
}

/** The allowed values of an enumeration (`Type.Enum`, a union of literals), or undefined. */
function enumValues (schema: Schema | undefined): string[] | undefined {
  if (schema === undefined) return undefined
  if (schema.enum !== undefined) return schema.enum.map(String)
  if (schema.anyOf !== undefined && schema.anyOf.every((branch) => branch.const !== undefined)) return schema.anyOf.map((branch) => String(branch.const))
  return undefined
}

type Control = 'checkbox' | 'number' | 'select' | 'choices' | 'lines' | 'textarea' | 'text'

function controlOf (field: Field): Control {
  const { base } = unwrap(field.schema as Schema)
  if (base.type === 'boolean') return 'checkbox'
  if (base.type === 'integer' || base.type === 'number') return 'number'
  if (base.type === 'array') return field.options !== undefined || enumValues(base.items) !== undefined ? 'choices' : 'lines'
  if (field.options !== undefined || enumValues(base) !== undefined) return 'select'
  // A URL or an address is one line, however long it may be.
  return field.multiline === true || (base.format === undefined && (base.maxLength ?? 0) >= LONG_TEXT) ? 'textarea' : 'text'
}

function optionsOf (field: Field): Option[] {
  if (field.options !== undefined) return field.options
  const { base } = unwrap(field.schema as Schema)
  return (enumValues(base.type === 'array' ? base.items : base) ?? []).map((value) => ({ value, label: field.valueLabels?.[value] ?? (WORDS.test(value) ? humanize(value) : value) }))
}

/** The fields of an object schema's members, in the schema's order, named `<prefix><member>`. */
export function objectFields (schema: TSchema, prefix: string, options: FieldOptions = {}): Field[] {
  const object = schema as Schema
  const required = new Set(options.required === 'all' ? Object.keys(object.properties ?? {}) : [...object.required ?? [], ...options.required ?? []])
  const fields = Object.entries(object.properties ?? {}).filter(([key]) => options.omit?.includes(key) !== true && (options.only?.includes(key) ?? true)).map(([key, member]): Field => ({
    name: `${prefix}${key}`,
    key,
    label: options.labels?.[key] ?? humanize(key),
    schema: member,
    // Null is a value, never "missing": a nullable member may always be emptied.
    required: required.has(key) && !unwrap(member).nullable,
    hint: options.hints?.[key] ?? sentence(member.description),
    options: options.options?.[key],
    multiline: options.multiline?.includes(key),
    valueLabels: options.values?.[key],
    empty: options.empty?.[key]
  }))
  for (const field of fields) {
    if (controlOf(field) === 'lines' && field.hint?.includes('per line') !== true) field.hint = `${field.hint ?? ''} One per line.`.trimStart()
  }
  return fields
}

/** A schema's description as a hint: "the call is ended …" → "The call is ended ….". */
function sentence (text: string | undefined): string | undefined {
  if (text === undefined || text === '') return undefined
  const capital = text.charAt(0).toUpperCase() + text.slice(1)
  return /[.!?)]$/.test(capital) ? capital : `${capital}.`
}

/** A stored object as the text of its fields (the inverse of readFields). */
export function fieldValues (fields: Field[], stored: Record<string, unknown>): FormValues {
  const values: FormValues = {}
  for (const field of fields) {
    const value = stored[field.key]
    const control = controlOf(field)
    if (control === 'choices') {
      values[field.name] = ''
      const chosen = new Set((value as unknown[] | undefined ?? []).map(String))
      for (const option of optionsOf(field)) values[`${field.name}.${option.value}`] = String(chosen.has(option.value))
    } else if (control === 'lines') values[field.name] = (value as unknown[] | undefined ?? []).join('\n')
    else values[field.name] = value === undefined || value === null ? (control === 'checkbox' ? 'false' : '') : String(value)
  }
  return values
}

const validators = new WeakMap<TSchema, ValidateFunction>()

function validatorOf (schema: TSchema): ValidateFunction {
  let validate = validators.get(schema)
  if (validate === undefined) {
    validate = compileBodySchema(schema)
    validators.set(schema, validate)
  }
  return validate
}

/**
 * The schemas' patterns in words, as a refusal says them; a pattern not listed reads "is not in the expected form"
 * (its hint, the schema's description, says more), and ids, phone numbers and addresses read as errors.ts says them.
 * A person never sees the expression itself.
 */
const PATTERN_WORDS: Record<string, string> = {
  // A variable's name: data retrieval fields, an API call's parameters and response variables.
  '^[A-Za-z_][A-Za-z0-9_]{0,63}$': 'may hold only letters, digits and underscores, start with a letter or an underscore, and be at most 64 characters long',
  '^#[0-9a-fA-F]{6}$': 'must be # and six hexadecimal digits (0-9, a-f), such as #2563eb',
  // A workflow step's id.
  '^[a-z][a-z0-9_]{0,39}$': 'may hold only lower-case letters, digits and underscores, start with a letter, and be at most 40 characters long',
  '^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$': 'must be a time of day as HH:MM, 24-hour, such as 09:30 (24:00: midnight at the end of the day)',
  '^[0-9]+$': 'may hold only digits'
}

/** A schema's complaint about a field, as a sentence: "The language must be …", "Line 2 of the origins must be …". */
export function problemOf (label: string, issue: AjvIssue): string {
  const item = /^\/(\d+)/.exec(issue.instancePath)
  const where = item === null ? the(label) : `Line ${Number(item[1]) + 1} of ${the(label).charAt(0).toLowerCase()}${the(label).slice(1)}`
  const words = issue.keyword === 'pattern' ? PATTERN_WORDS[String(issue.params.pattern)] : undefined
  if (words !== undefined) return `${where} ${words}.`
  const { message } = invalidInput(where, { ...issue, instancePath: item === null ? issue.instancePath : issue.instancePath.slice(item[0].length) })
  return `${message.includes(' must match pattern ') ? `${where} is not in the expected form` : message}.`
}

type Read = { absent: true } | { value: unknown } | { problem: string }

function readField (field: Field, form: FormValues): Read {
  const control = controlOf(field)
  const raw = form[field.name]
  if (raw === undefined) return { absent: true }
  if (control === 'checkbox') return { value: raw === 'true' }
  if (control === 'choices') return { value: optionsOf(field).filter((option) => form[`${field.name}.${option.value}`] === 'true').map((option) => option.value) }
  if (control === 'lines') {
    const lines = raw.split(/\r?\n/).map((line) => line.trim()).filter((line) => line !== '')
    // No lines: none, or (where a list may not be empty) the member left out.
    return { value: lines.length === 0 && !field.required && (unwrap(field.schema as Schema).base.minItems ?? 0) > 0 ? null : lines }
  }
  const text = control === 'textarea' ? raw : raw.trim()
  if (text === '') return field.required ? { problem: `${the(field.label)} is required.` } : { value: null }
  if (control === 'number') {
    return /^-?\d+(\.\d+)?$/.test(text) ? { value: Number(text) } : { problem: `${the(field.label)} must be a number.` }
  }
  return { value: text }
}

/**
 * The members a form sent, checked by their schemas: a field missing from the form is left out (unchanged), an
 * emptied optional one is null (its default, or none). Choices from `options` must be among them.
 */
export function readFields (fields: Field[], form: FormValues): { values: Record<string, unknown>, problems: Problems } {
  const values: Record<string, unknown> = {}
  const problems: Problems = {}
  for (const field of fields) {
    const read = readField(field, form)
    if ('absent' in read) continue
    if ('problem' in read) {
      problems[field.name] = read.problem
      continue
    }
    if (read.value !== null) {
      const control = controlOf(field)
      if ((control === 'select' || control === 'choices') && ![read.value].flat().every((value) => optionsOf(field).some((option) => option.value === value))) {
        problems[field.name] = `${the(field.label)} must be one of the listed choices.`
        continue
      }
      const validate = validatorOf(field.schema)
      if (!validate(read.value)) {
        problems[field.name] = problemOf(field.label, validate.errors![0] as AjvIssue)
        continue
      }
    }
    values[field.key] = read.value
  }
  return { values, problems }
}

/**
 * One field: its label, control, hint and problem. A checkbox is followed by a hidden `false` of the same name:
 * the console reads the first value of a name, so an unticked box says false rather than nothing.
 */
export function renderField (field: Field, values: FormValues, problems: Problems): SafeHtml {
  const id = idOf(field.name)
  const problem = problems[field.name]
  const value = values[field.name] ?? ''
  const { attrs: aria, after } = describe(id, field.hint, problem)
  const { base, nullable } = unwrap(field.schema as Schema)
  const required = field.required && html` required`
  switch (controlOf(field)) {
    case 'checkbox':
      return html`<div class="check"><input type="checkbox" id="${id}" name="${field.name}" value="true"${value === 'true' && html` checked`}${aria}><input type="hidden" name="${field.name}" value="false"><label for="${id}">${field.label}</label></div>
${after}`
    case 'choices':
      // Its id (and tabindex) for the error summary's link: the group takes focus, its legend is read.
      return html`<fieldset class="choices" id="${id}" tabindex="-1"${aria}><legend>${field.label}</legend><input type="hidden" name="${field.name}" value="">
${optionsOf(field).map((option) => {
  const optionId = idOf(`${field.name}.${option.value}`)
  return html`<div class="check"><input type="checkbox" id="${optionId}" name="${field.name}.${option.value}" value="true"${values[`${field.name}.${option.value}`] === 'true' && html` checked`}><label for="${optionId}">${option.label}</label></div>`
})}</fieldset>
${after}`
    case 'select': {
      const options = optionsOf(field)
      const known = options.some((option) => option.value === value)
      return html`<label for="${id}">${field.label}</label>
<select id="${id}" name="${field.name}"${aria}>
${(nullable || !field.required) && html`<option value=""${value === '' && html` selected`}>${field.empty ?? (nullable ? 'None (the default)' : 'Choose one')}</option>`}
${!known && value !== '' && html`<option value="${value}" selected>${value}</option>`}
${options.map((option) => html`<option value="${option.value}"${option.value === value && html` selected`}>${option.label}</option>`)}
</select>
${after}`
    }
    case 'number':
      return html`<label for="${id}">${field.label}</label>
<input id="${id}" name="${field.name}" type="number" value="${value}"${base.minimum !== undefined && html` min="${base.minimum}"`}${base.maximum !== undefined && html` max="${base.maximum}"`} step="${base.type === 'integer' ? '1' : 'any'}"${required}${aria}>
${after}`
    case 'lines':
    case 'textarea': {
      // The text starts after a line break, which the HTML parser drops: text starting with one keeps it.
      // An empty list is a list: lines are never `required`.
      const lines = controlOf(field) === 'lines'
      return html`<label for="${id}">${field.label}</label>
<textarea id="${id}" name="${field.name}" rows="${lines ? 3 : 4}"${base.maxLength !== undefined && html` maxlength="${base.maxLength}"`}${!lines && required}${aria}>
${value}</textarea>
${after}`
    }
    default: {
      const type = base.format === 'http-url' ? 'url' : base.pattern === EMAIL_PATTERN ? 'email' : 'text'
      return html`<label for="${id}">${field.label}</label>
<input id="${id}" name="${field.name}" type="${type}" value="${value}"${base.maxLength !== undefined && html` maxlength="${base.maxLength}"`}${required}${aria}>
${after}`
    }
  }
}

export const renderFields = (fields: Field[], values: FormValues, problems: Problems): SafeHtml =>
  html`${fields.map((field) => renderField(field, values, problems))}`

// Rows: a list of objects (data-retrieval fields), each row a fieldset of its members named `<name>.<i>.<member>`,
// with a box that removes it. The hidden `<name>` holds the number of rows shown, so that a form without it
// leaves the list unchanged.

export interface Rows {
  name: string
  /** "Field 2" */
  legend: (index: number) => string
  fields: (index: number) => Field[]
}

export const rowCount = (name: string, form: FormValues) => Math.min(MAX_ROWS, Math.max(0, Number.parseInt(form[name] ?? '0', 10) || 0))

/** Stored rows as form text, and `blank` empty rows after them for new entries. */
export function rowValues (rows: Rows, stored: Array<Record<string, unknown>>, blank: number): FormValues {
  const values: FormValues = { [rows.name]: String(stored.length + blank) }
  stored.forEach((row, i) => Object.assign(values, fieldValues(rows.fields(i), row)))
  for (let i = stored.length; i < stored.length + blank; i++) Object.assign(values, fieldValues(rows.fields(i), {}))
  return values
}

/** Rows; their controls are not `required`, since an empty row is simply no row. */
export function renderRows (rows: Rows, values: FormValues, problems: Problems): SafeHtml {
  const count = rowCount(rows.name, values)
  return html`<input type="hidden" name="${rows.name}" value="${count}">
${Array.from({ length: count }, (_, i) => {
  const remove = `${rows.name}.${i}.remove`
  return html`<fieldset class="row"><legend>${rows.legend(i)}</legend>
${renderFields(rows.fields(i).map((field) => ({ ...field, required: false })), values, problems)}
<div class="check"><input type="checkbox" id="${idOf(remove)}" name="${remove}" value="true"${values[remove] === 'true' && html` checked`}><label for="${idOf(remove)}">Remove ${rows.legend(i).toLowerCase()}</label></div>
</fieldset>`
})}`
}

/**
 * The rows a form sent, without the removed and the empty ones; `undefined` when the form did not hold the list.
 * `index` is each row's position in the form, to put a later problem under the right row.
 */
export function readRows (rows: Rows, form: FormValues): { rows: Array<{ index: number, values: Record<string, unknown> }> | undefined, problems: Problems } {
  if (form[rows.name] === undefined) return { rows: undefined, problems: {} }
  const kept = []
  const problems: Problems = {}
  for (let i = 0; i < rowCount(rows.name, form); i++) {
    if (form[`${rows.name}.${i}.remove`] === 'true') continue
    const fields = rows.fields(i)
    const blank = fields.every((field) => {
      const value = form[field.name]
      return value === undefined || value.trim() === '' || value === 'false' || controlOf(field) === 'select'
    })
    if (blank) continue
    const read = readFields(fields, form)
    Object.assign(problems, read.problems)
    kept.push({ index: i, values: read.values })
  }
  return { rows: kept, problems }
}

// Pairs: a name and a value per row (headers, query parameters). Write-only pairs (header values) never show a
// value: a stored row shows its name, an empty value keeps the stored one, and a box removes the row.

export interface Pairs {
  name: string
  /** "header", "parameter" */
  noun: string
  caption: string
  /** Set for write-only values: what a stored value left empty is read as ("keep it": the API's mask). */
  keep?: string
}

export function pairValues (pairs: Pairs, stored: Record<string, string> | undefined, blank = 2): FormValues {
  const entries = Object.entries(stored ?? {})
  const values: FormValues = { [pairs.name]: String(entries.length + blank) }
  entries.forEach(([key, value], i) => {
    values[`${pairs.name}.${i}.name`] = key
    if (pairs.keep !== undefined) values[`${pairs.name}.${i}.stored`] = 'true'
    else values[`${pairs.name}.${i}.value`] = value
  })
  return values
}

// The table's id (and tabindex) is where the error summary's link for a problem of the whole table leads.
export function renderPairs (pairs: Pairs, values: FormValues, problems: Problems): SafeHtml {
  const count = rowCount(pairs.name, values)
  const writeOnly = pairs.keep !== undefined
  const cell = (i: number, part: 'name' | 'value', label: string, stored: boolean) => {
    const name = `${pairs.name}.${i}.${part}`
    const id = idOf(name)
    const problem = problems[name]
    const hint = part === 'value' && stored ? 'Stored; empty keeps it' : undefined
    const { attrs, after } = describe(id, hint, problem)
    return html`<td><input id="${id}" name="${name}" value="${part === 'value' && writeOnly ? '' : values[name] ?? ''}" aria-label="${label}"${part === 'value' && writeOnly && html` autocomplete="off"`}${attrs}>${after}</td>`
  }
  return html`<input type="hidden" name="${pairs.name}" value="${count}">
<div class="table" id="${idOf(pairs.name)}" tabindex="-1"><table class="pairs">
<caption>${pairs.caption}</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Value</th>${writeOnly && html`<th scope="col">Remove</th>`}</tr></thead>
<tbody>${Array.from({ length: count }, (_, i) => {
  const stored = values[`${pairs.name}.${i}.stored`] === 'true'
  const name = values[`${pairs.name}.${i}.name`] ?? ''
  const remove = `${pairs.name}.${i}.remove`
  return html`<tr>${stored
    ? html`<td><code>${name}</code><input type="hidden" name="${pairs.name}.${i}.name" value="${name}"><input type="hidden" name="${pairs.name}.${i}.stored" value="true"></td>`
    : cell(i, 'name', `Name of ${pairs.noun} ${i + 1}`, false)}
${cell(i, 'value', stored ? `New value of ${name}` : `Value of ${pairs.noun} ${i + 1}`, stored)}
${writeOnly && html`<td>${stored && html`<input type="checkbox" id="${idOf(remove)}" name="${remove}" value="true" aria-label="Remove ${name}"${values[remove] === 'true' && html` checked`}>`}</td>`}</tr>`
})}</tbody>
</table></div>`
}

/** The pairs a form sent as one object (stored write-only values as `keep`); undefined when the form did not hold them. */
export function readPairs (pairs: Pairs, form: FormValues): { value: Record<string, string> | undefined, problems: Problems } {
  if (form[pairs.name] === undefined) return { value: undefined, problems: {} }
  const value = new Map<string, string>()
  const problems: Problems = {}
  for (let i = 0; i < rowCount(pairs.name, form); i++) {
    const at = (part: string) => form[`${pairs.name}.${i}.${part}`] ?? ''
    if (at('remove') === 'true') continue
    const name = at('name').trim()
    const text = at('value')
    const stored = at('stored') === 'true'
    if (name === '' && text === '') continue
    if (name === '') problems[`${pairs.name}.${i}.name`] = `Give this ${pairs.noun} a name.`
    else if (value.has(name)) problems[`${pairs.name}.${i}.name`] = `${humanize(pairs.noun)} ${name} is given twice.`
    else if (text === '' && pairs.keep !== undefined && !stored) problems[`${pairs.name}.${i}.value`] = `Give ${name} a value.`
    else value.set(name, text === '' && stored && pairs.keep !== undefined ? pairs.keep : text)
  }
  // fromEntries defines own properties: a row named __proto__ stays a row.
  return { value: Object.fromEntries(value), problems }
}
