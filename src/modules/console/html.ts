// HTML built from tagged templates: every interpolated value is escaped unless it is already SafeHtml (the
// result of another html`…` or of raw()), so that forgetting to escape is not a possible mistake.

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

export function escapeHtml (text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c])
}

/** A fragment of HTML that is safe to insert as it is. */
export class SafeHtml {
  readonly value: string

  constructor (value: string) {
    this.value = value
  }

  toString (): string {
    return this.value
  }
}

/** Marks text as HTML: only for fragments this code wrote itself, never for input. */
export const raw = (text: string): SafeHtml => new SafeHtml(text)

/** null, undefined and false render as nothing (`${cond && html`…`}`), arrays as their items joined. */
function render (value: unknown): string {
  if (value === null || value === undefined || value === false) return ''
  if (value instanceof SafeHtml) return value.value
  if (Array.isArray(value)) return value.map(render).join('')
  return escapeHtml(String(value))
}

export function html (strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0]
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]
  return new SafeHtml(out)
}
