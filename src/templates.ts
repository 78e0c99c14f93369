// `{{variable}}` templates: the text of prompts, begin messages, actions' URLs, bodies and messages, filled in
// with a call's variables. One rule everywhere: a variable without a value becomes empty, never the placeholder.

/** A {{variable}} in a template. */
export const VARIABLE = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g

const ONE_VARIABLE = /^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$/

/** A value as text: objects as JSON, null and undefined as nothing. */
export const text = (value: unknown) => (value === null || value === undefined ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value))

/** Variables replaced in text; `encode` percent-encodes each value (a URL). */
export function renderText (template: string, variables: Record<string, unknown>, encode = false): string {
  return template.replace(VARIABLE, (_, name: string) => (encode ? encodeURIComponent(text(variables[name])) : text(variables[name])))
}

/** A JSON value with variables filled in; a string that is exactly one variable takes the variable's type. */
export function renderValue (value: unknown, variables: Record<string, unknown>): unknown {
  if (typeof value === 'string') {
    const single = ONE_VARIABLE.exec(value)
    if (single !== null) return variables[single[1]] ?? ''
    return renderText(value, variables)
  }
  if (Array.isArray(value)) return value.map((item) => renderValue(item, variables))
  if (value !== null && typeof value === 'object') return renderRecord(value, variables)
  return value
}

/** An object's values rendered as renderValue renders each (a request's query or body). */
export function renderRecord (value: object, variables: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, renderValue(item, variables)]))
}
