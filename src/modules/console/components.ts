import { html, type SafeHtml } from './html.ts'

// The pieces the console's views are built from (STYLE.md rule 17): a view takes the data its handler loaded and
// returns HTML made of these, so that every list looks and behaves the same and a new page is mostly data.

export interface Column<T> {
  /** Text, or SafeHtml (a header read only by screen readers). */
  header: string | SafeHtml
  /** The cell's content: text is escaped, SafeHtml kept. */
  cell: (row: T) => unknown
  /** Figures: right-aligned, tabular digits. */
  numeric?: boolean
}

/**
 * A table that scrolls sideways inside its own box when it is wider than the screen, with a caption (hidden from
 * sight but read by screen readers when the page's heading already says it) and the empty state in words.
 */
export function dataTable<T> (options: { caption: string, columns: Array<Column<T>>, rows: T[], empty: string | SafeHtml, className?: string, captionHidden?: boolean }): SafeHtml {
  const { columns, rows } = options
  if (rows.length === 0) return html`<p class="empty">${options.empty}</p>`
  const numeric = (column: Column<T>) => column.numeric === true && html` class="number"`
  return html`<div class="table"><table${options.className !== undefined && html` class="${options.className}"`}>
  <caption${options.captionHidden === true && html` class="visually-hidden"`}>${options.caption}</caption>
  <thead><tr>${columns.map((column) => html`<th scope="col"${numeric(column)}>${column.header}</th>`)}</tr></thead>
  <tbody>${rows.map((row) => html`<tr>${columns.map((column) => html`<td${numeric(column)}>${column.cell(row)}</td>`)}</tr>`)}</tbody>
</table></div>`
}

/** Links to the neighbouring pages of a list; nothing when the list is one page. `first` goes back to the start. */
export function pager (options: { label: string, first?: { href: string, text: string }, previous?: { href: string, text: string }, next?: { href: string, text: string } }): SafeHtml {
  const { first, previous, next } = options
  if (previous === undefined && next === undefined) return html``
  return html`<nav aria-label="${options.label}"><ul class="pager">
  ${first !== undefined && html`<li><a href="${first.href}">${first.text}</a></li>`}
  ${previous !== undefined && html`<li><a href="${previous.href}" rel="prev">${previous.text}</a></li>`}
  ${next !== undefined && html`<li><a href="${next.href}" rel="next">${next.text}</a></li>`}
</ul></nav>`
}

/** One labelled control of a filter bar. */
export const filterField = (id: string, label: string, control: SafeHtml) => html`<div class="field"><label for="${id}">${label}</label>${control}</div>`

/** A select of a filter bar: "any" first (the empty value), then the choices with the chosen one selected. */
export const filterSelect = (id: string, any: string, choices: Array<{ value: string, label: string }>, chosen: string) => html`<select id="${id}" name="${id}">
  <option value="">${any}</option>${choices.map((choice) => html`<option value="${choice.value}"${choice.value === chosen && html` selected`}>${choice.label}</option>`)}</select>`

/**
 * A list's filters in one row (a GET form, so the address can be kept and shared; a search landmark): controls
 * from filterField, the button, and an optional hint under them.
 */
export function filterBar (options: { action: string, label: string, fields: SafeHtml[], submit: string, hint?: SafeHtml }): SafeHtml {
  return html`<form method="get" action="${options.action}" role="search" aria-label="${options.label}" class="filter-bar">
  ${options.fields}
  <button type="submit">${options.submit}</button>
  ${options.hint}
</form>`
}

// Error summary (issue 32, point 4): what a refused form got wrong, at its top, each problem a link to its field.

/**
 * The problems of a refused form as a list of links to the fields (by `#<id>`: a field named `a.b` has id `a-b`);
 * role="alert" and focusable so that a page opened at `#form-problems` (drafts.ts) reads it first. Nothing when
 * there is no problem.
 */
export function errorSummary (problems: Record<string, string | undefined>): SafeHtml {
  // A problem about the whole form (drafts.ts FORM_PROBLEM) has no field to link to: its page shows it by its button.
  const listed = Object.entries(problems).filter((entry): entry is [string, string] => entry[0] !== '' && entry[1] !== undefined)
  if (listed.length === 0) return html``
  return html`<div id="form-problems" class="notice error error-summary" role="alert" tabindex="-1">
  <h2>${listed.length === 1 ? 'One field needs' : `${listed.length} fields need`} another look</h2>
  <ul>${listed.map(([name, problem]) => html`<li><a href="#${name.replaceAll('.', '-')}">${problem}</a></li>`)}</ul>
</div>`
}
