import { html, type SafeHtml } from './html.ts'

// Charts drawn on the server as inline SVG: no script, and no style attribute (the CSP forbids inline styles), so
// colours come from classes in console.css. Each chart is an image with a title and a description for screen
// readers, and its figures follow in a table inside <details>.

/**
 * One bar; `kind` picks its colour class (`s0`…`s7`, or a sentiment) instead of the first series colour; `href`: the
 * page of what it counts (the bar with its label and value link there, and its row's label in the table).
 */
export interface Bar { label: string, value: number, kind?: string, href?: string }
/** One series of a stacked chart: a value per category. */
export interface Series { name: string, values: number[] }

interface ChartText {
  /** Unique in the page: the ids of the title, description and table derive from it. */
  id: string
  title: string
  description: string
  /** The table's header over the labels (Day, Agent). */
  labelHeader: string
  /** The table's header over the values, with the unit (Minutes, Credits). */
  valueHeader: string
}

/** As many series colours as console.css defines; the last is for “other”. */
export const SERIES_COLOURS = 8

const WIDTH = 640
const COLUMN_HEIGHT = 240
const MARGIN = { top: 10, right: 8, bottom: 28, left: 52 }
const MAX_X_LABELS = 6
const ROW_HEIGHT = 28
const LABEL_WIDTH = 170
const MAX_LABEL_CHARS = 24

/** Coordinates to 2 decimals: the page stays small and the output stable. */
const at = (n: number) => Math.round(n * 100) / 100

/** A figure for people: thousands separated, at most 2 decimals. */
export const formatNumber = (value: number) => value.toLocaleString('en-US', { maximumFractionDigits: 2 })

/** A figure with its unit, singular for one (the units are plurals in s: calls, minutes, credits). */
const amount = (value: number, unit: string) => `${formatNumber(value)} ${value === 1 ? unit.replace(/s$/, '') : unit}`

/** An axis label: 1.2K, 35M; below 1 its two significant digits (a few seconds of calls are 0.025 minutes, not 0). */
export const tickLabel = (value: number) => Math.abs(value) < 1
  ? value.toLocaleString('en-US', { maximumSignificantDigits: 2 })
  : value.toLocaleString('en-US', { notation: 'compact', maximumFractionDigits: 1 })

export interface Scale { max: number, ticks: number[] }

/**
 * An axis from 0 to a round number at or above `max`, in about `count` steps of 1, 2, 2.5 or 5 times a power of
 * ten; `whole` keeps steps whole (counts of calls). Nothing above zero gives 0 to 1.
 */
export function niceScale (max: number, count = 4, whole = false): Scale {
  if (!(max > 0)) return { max: 1, ticks: [0, 1] }
  const raw = max / count
  const magnitude = 10 ** Math.floor(Math.log10(raw))
  let step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw)!
  if (whole) step = Math.max(1, Math.ceil(step))
  const steps = Math.ceil(max / step - 1e-9)
  const ticks = Array.from({ length: steps + 1 }, (_, i) => Number((i * step).toPrecision(12)))
  return { max: ticks[ticks.length - 1], ticks }
}

/** A bar's length: in proportion, yet at least 1 unit for any value above 0, so that a small one beside a huge one still shows. */
function length (value: number, scale: Scale, full: number): number {
  if (!(value > 0)) return 0
  return Math.max(1, (value / scale.max) * full)
}

/**
 * The `keep` largest items by `size`, in that order, the others merged by `merge` into one last item; when
 * only one would be merged it stays itself.
 */
export function keepLargest<T> (items: T[], keep: number, size: (item: T) => number, merge: (rest: T[]) => T): T[] {
  const sorted = [...items].sort((a, b) => size(b) - size(a))
  return sorted.length <= keep + 1 ? sorted : [...sorted.slice(0, keep), merge(sorted.slice(keep))]
}

const shorten = (text: string) => text.length > MAX_LABEL_CHARS ? `${text.slice(0, MAX_LABEL_CHARS - 1)}…` : text

/** The chart; one whose bars are links is a group of them (an image may hold no link), else an image. */
function svg (text: ChartText, height: number, body: SafeHtml[], linked = false): SafeHtml {
  return html`<svg class="chart" viewBox="0 0 ${WIDTH} ${height}" role="${linked ? 'group' : 'img'}" aria-labelledby="${text.id}-title" aria-describedby="${text.id}-desc">
<title id="${text.id}-title">${text.title}</title>
<desc id="${text.id}-desc">${text.description}</desc>
${body}
</svg>`
}

function table (text: ChartText, headers: string[], rows: Array<{ label: string, values: number[], href?: string }>): SafeHtml {
  return html`<details class="figures">
<summary>The figures of “${text.title}”</summary>
<div class="table"><table id="${text.id}-table">
  <caption>${text.title}</caption>
  <thead><tr><th scope="col">${text.labelHeader}</th>${headers.map((header) => html`<th scope="col">${header}</th>`)}</tr></thead>
  <tbody>${rows.map((row) => html`<tr><th scope="row">${row.href === undefined ? row.label : html`<a href="${row.href}">${row.label}</a>`}</th>${row.values.map((value) => html`<td>${formatNumber(value)}</td>`)}</tr>`)}</tbody>
</table></div>
</details>`
}

/** The value axis of a column chart: grid lines and their labels. */
function valueAxis (scale: Scale, plotHeight: number): SafeHtml[] {
  return scale.ticks.map((tick) => {
    const y = at(MARGIN.top + plotHeight - (tick / scale.max) * plotHeight)
    return html`<line class="grid" x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y}" y2="${y}"/><text class="tick" x="${MARGIN.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${tickLabel(tick)}</text>`
  })
}

/** Labels under at most MAX_X_LABELS of the columns, evenly spread, always the first. */
function categoryAxis (labels: string[], slot: number): SafeHtml[] {
  const every = Math.ceil(labels.length / MAX_X_LABELS)
  return labels.flatMap((label, i) => i % every !== 0
    ? []
    : [html`<text class="tick" x="${at(MARGIN.left + (i + 0.5) * slot)}" y="${COLUMN_HEIGHT - 8}" text-anchor="middle">${label}</text>`])
}

interface ColumnOptions { categories: string[], series: Series[], unit: string, whole?: boolean }

/** Columns of stacked segments; `legend` names the series (in a list and in the table's columns). */
function columns (text: ChartText & ColumnOptions, legend: boolean): SafeHtml {
  const { categories, series } = text
  const totals = categories.map((_, i) => series.reduce((sum, s) => sum + (s.values[i] ?? 0), 0))
  const scale = niceScale(Math.max(0, ...totals), 4, text.whole)
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right
  const plotHeight = COLUMN_HEIGHT - MARGIN.top - MARGIN.bottom
  const slot = plotWidth / Math.max(1, categories.length)
  const barWidth = at(Math.max(0.5, slot * 0.8))
  const segments = categories.flatMap((category, i) => {
    let top = MARGIN.top + plotHeight
    const x = at(MARGIN.left + i * slot + slot * 0.1)
    return series.flatMap((s, j) => {
      const value = s.values[i] ?? 0
      const height = length(value, scale, plotHeight)
      if (height === 0) return []
      top -= height
      const label = legend ? `${category}, ${s.name}` : category
      return [html`<rect class="bar s${j % SERIES_COLOURS}" x="${x}" y="${at(top)}" width="${barWidth}" height="${at(height)}"><title>${label}: ${amount(value, text.unit)}</title></rect>`]
    })
  })
  const baseline = MARGIN.top + plotHeight
  const axis = html`<line class="axis" x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${baseline}" y2="${baseline}"/>`
  const headers = legend ? [...series.map((s) => s.name), 'Total'] : [text.valueHeader]
  const rows = categories.map((label, i) => ({ label, values: legend ? [...series.map((s) => s.values[i] ?? 0), totals[i]] : [totals[i]] }))
  return html`${svg(text, COLUMN_HEIGHT, [...valueAxis(scale, plotHeight), ...segments, ...categoryAxis(categories, slot), axis])}
${legend && html`<ul class="legend" aria-label="Legend of “${text.title}”">${series.map((s, j) =>
    html`<li><span class="swatch s${j % SERIES_COLOURS}"></span>${s.name}</li>`)}</ul>`}
${table(text, headers, rows)}`
}

/**
 * Stacked columns, one per category (a day), one segment per series, coloured in series order (`s0`…) and named
 * by a legend. The table has a row per category and a column per series, then the total.
 */
export const stackedColumnChart = (text: ChartText & ColumnOptions) => columns(text, true)

/** Columns, one per bar (a day); the table has a row per bar. */
export function columnChart (text: ChartText & { bars: Bar[], unit: string, whole?: boolean }): SafeHtml {
  return columns({ ...text, categories: text.bars.map((bar) => bar.label), series: [{ name: text.valueHeader, values: text.bars.map((bar) => bar.value) }] }, false)
}

/** Horizontal bars, one row each with its label (shortened; the whole in the bar's tooltip) and value. */
export function barChart (text: ChartText & { bars: Bar[], unit: string }): SafeHtml {
  const { bars } = text
  const scale = niceScale(Math.max(0, ...bars.map((bar) => bar.value)))
  // Room after the longest bar for its value.
  const plotWidth = WIDTH - LABEL_WIDTH - 80
  const height = bars.length * ROW_HEIGHT + 8
  const rows = bars.map((bar, i) => {
    const y = 4 + i * ROW_HEIGHT
    const width = length(bar.value, scale, plotWidth)
    const middle = at(y + ROW_HEIGHT / 2)
    const row = html`<text class="label" x="${LABEL_WIDTH - 8}" y="${middle}" text-anchor="end" dominant-baseline="middle">${shorten(bar.label)}</text>
<rect class="bar ${bar.kind ?? 's0'}" x="${LABEL_WIDTH}" y="${y + 4}" width="${at(width)}" height="${ROW_HEIGHT - 8}"><title>${bar.label}: ${amount(bar.value, text.unit)}</title></rect>
<text class="value" x="${at(LABEL_WIDTH + width + 6)}" y="${middle}" dominant-baseline="middle">${formatNumber(bar.value)}</text>`
    // Named by what it shows (axe: the visible text is part of the name); the table's link has the whole label.
    return bar.href === undefined ? row : html`<a href="${bar.href}" aria-label="${shorten(bar.label)}: ${amount(bar.value, text.unit)}">${row}</a>`
  })
  return html`${svg(text, height, [...rows, html`<line class="axis" x1="${LABEL_WIDTH}" x2="${LABEL_WIDTH}" y1="4" y2="${height - 4}"/>`], bars.some((bar) => bar.href !== undefined))}
${table(text, [text.valueHeader], bars.map((bar) => ({ label: bar.label, values: [bar.value], href: bar.href })))}`
}
