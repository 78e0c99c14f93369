import t from 'tap'
import { barChart, columnChart, formatNumber, keepLargest, niceScale, SERIES_COLOURS, stackedColumnChart, tickLabel } from '../../src/modules/console/charts.ts'

const text = { id: 'c', title: 'Calls', description: 'Calls per day.', labelHeader: 'Day', valueHeader: 'Calls', unit: 'calls' }

/** The rects' heights or widths, in order. */
const sizes = (svg: string, attribute: 'height' | 'width') =>
  [...svg.matchAll(new RegExp(`<rect class="bar[^"]*"[^>]* ${attribute}="([0-9.]+)"`, 'g'))].map((m) => Number(m[1]))

/** The table cells (th and td) of each body row. */
const tableRows = (html: string) => [...html.matchAll(/<tr><th scope="row">(.*?)<\/th>(.*?)<\/tr>/g)]
  .map((m) => [m[1], ...[...m[2].matchAll(/<td>(.*?)<\/td>/g)].map((c) => c[1])])

t.test('niceScale: round tops and steps; zero; whole steps for counts; huge values', async (t) => {
  t.same(niceScale(0), { max: 1, ticks: [0, 1] }, 'nothing above zero: 0 to 1')
  t.same(niceScale(-5), { max: 1, ticks: [0, 1] })
  t.same(niceScale(Number.NaN), { max: 1, ticks: [0, 1] })
  t.same(niceScale(100), { max: 100, ticks: [0, 25, 50, 75, 100] })
  t.same(niceScale(7), { max: 8, ticks: [0, 2, 4, 6, 8] })
  t.same(niceScale(0.3), { max: 0.3, ticks: [0, 0.1, 0.2, 0.3] }, 'no floating-point dust')
  t.same(niceScale(1), { max: 1, ticks: [0, 0.25, 0.5, 0.75, 1] })
  t.same(niceScale(1, 4, true), { max: 1, ticks: [0, 1] }, 'whole steps: no quarter calls')
  t.same(niceScale(3, 4, true), { max: 3, ticks: [0, 1, 2, 3] })
  const huge = niceScale(9.2e18)
  t.equal(huge.max, 1e19)
  t.ok(huge.ticks.length <= 6 && huge.ticks.every(Number.isFinite))
})

t.test('columns: heights in proportion, a small value beside a huge one still shows, zero draws nothing', async (t) => {
  const chart = columnChart({ ...text, bars: [{ label: '2026-05-01', value: 1e12 }, { label: '2026-05-02', value: 1 }, { label: '2026-05-03', value: 0 }, { label: '2026-05-04', value: 5e11 }] }).value
  const heights = sizes(chart, 'height')
  t.equal(heights.length, 3, 'no rect for the zero')
  t.equal(heights[0], 202, 'the largest fills the plot (1e12 is the top of its scale)')
  t.equal(heights[1], 1, 'at least one unit')
  t.equal(heights[2], 101)
  t.match(chart, '<svg class="chart" viewBox="0 0 640 240" role="img" aria-labelledby="c-title" aria-describedby="c-desc">')
  t.match(chart, '<title id="c-title">Calls</title>')
  t.match(chart, '<desc id="c-desc">Calls per day.</desc>')
  t.match(chart, '>1T</text>', 'compact axis labels')
  t.notMatch(chart, /style=/, 'no inline style (the CSP forbids it)')
  t.notMatch(chart, 'class="legend"', 'one series: no legend')
  t.same(tableRows(chart), [['2026-05-01', '1,000,000,000,000'], ['2026-05-02', '1'], ['2026-05-03', '0'], ['2026-05-04', '500,000,000,000']])
  t.match(chart, /<details class="figures">\s*<summary>The figures of “Calls”<\/summary>/)

  const empty = columnChart({ ...text, bars: [{ label: 'a', value: 0 }] }).value
  t.same(sizes(empty, 'height'), [], 'all zero: an axis of 0 to 1 and no bars')
  t.match(empty, '>1</text>')
  t.notMatch(empty, /NaN|Infinity/)
  t.notMatch(columnChart({ ...text, bars: [] }).value, /NaN|Infinity/, 'no bars at all')
})

t.test('names are text in the SVG, the legend and the table', async (t) => {
  const name = 'Sales <b>"&\'</b>'
  const stacked = stackedColumnChart({ ...text, categories: ['2026-05-01'], series: [{ name, values: [2] }] }).value
  t.notMatch(stacked, '<b>')
  t.match(stacked, '<title>2026-05-01, Sales &lt;b&gt;&quot;&amp;&#39;&lt;/b&gt;: 2 calls</title>', 'the tooltip inside the SVG')
  t.match(stacked, '<li><span class="swatch s0"></span>Sales &lt;b&gt;&quot;&amp;&#39;&lt;/b&gt;</li>', 'the legend')
  t.match(stacked, '<th scope="col">Sales &lt;b&gt;&quot;&amp;&#39;&lt;/b&gt;</th>', 'the table')
  const bars = barChart({ ...text, title: '<i>Costs</i>', bars: [{ label: name, value: 3 }, { label: 'x'.repeat(40), value: 1 }] }).value
  t.notMatch(bars, /<b>|<i>/)
  t.match(bars, /<text class="label"[^>]*>Sales &lt;b&gt;&quot;&amp;&#39;&lt;\/b&gt;<\/text>/, 'the label inside the SVG')
  t.match(bars, '<title id="c-title">&lt;i&gt;Costs&lt;/i&gt;</title>')
  t.match(bars, `>${'x'.repeat(23)}…</text>`, 'a long label is shortened in the chart')
  t.match(bars, `<title>${'x'.repeat(40)}: 1 call</title>`, 'and whole in its tooltip (one call: singular)')
  t.match(bars, `<th scope="row">${'x'.repeat(40)}</th>`, 'and in the table')
})

t.test('bars with links: a group of links named as they read, each label linked in the table; without: an image', async (t) => {
  const chart = barChart({ ...text, bars: [{ label: 'No answer', value: 2, href: '/calls?reason=no_answer&x=<b>' }, { label: 'x'.repeat(40), value: 1, href: '/calls?reason=x' }, { label: 'In progress', value: 1 }] }).value
  t.match(chart, '<svg class="chart" viewBox="0 0 640 92" role="group" aria-labelledby="c-title"', 'an image may hold no link')
  t.match(chart, '<a href="/calls?reason=no_answer&amp;x=&lt;b&gt;" aria-label="No answer: 2 calls"><text class="label"', 'the bar, its label and value in one link, escaped')
  t.match(chart, `<a href="/calls?reason=x" aria-label="${'x'.repeat(23)}…: 1 call">`, 'named by the shortened label it shows')
  t.equal([...chart.matchAll(/<a href/g)].length, 4, 'a bar without a link has none (two bars and two table rows have)')
  t.match(chart, '<th scope="row"><a href="/calls?reason=no_answer&amp;x=&lt;b&gt;">No answer</a></th>', 'the table links the label')
  t.match(chart, '<th scope="row">In progress</th>')
  t.match(barChart({ ...text, bars: [{ label: 'A', value: 1 }] }).value, 'role="img"')
})

t.test('stacked columns: segments on top of each other, a legend and a total column', async (t) => {
  const chart = stackedColumnChart({ ...text, whole: true, categories: ['d1', 'd2'], series: [{ name: 'A', values: [3, 0] }, { name: 'B', values: [1, 4] }] }).value
  const rects = [...chart.matchAll(/<rect class="bar (s\d)" x="([0-9.]+)" y="([0-9.]+)" width="[0-9.]+" height="([0-9.]+)">/g)].map((m) => ({ kind: m[1], x: Number(m[2]), y: Number(m[3]), height: Number(m[4]) }))
  t.equal(rects.length, 3)
  const [a1, b1, b2] = rects
  t.equal(a1.kind, 's0')
  t.equal(b1.kind, 's1')
  t.equal(a1.x, b1.x, 'one column per day')
  t.equal(b1.y + b1.height, a1.y, 'B sits on A')
  t.equal(b2.height, a1.height + b1.height, '4 calls as tall as 3 + 1')
  t.same(tableRows(chart), [['d1', '3', '1', '4'], ['d2', '0', '4', '4']])
  t.match(chart, '<th scope="col">A</th><th scope="col">B</th><th scope="col">Total</th>')
})

t.test('many agents: the largest keep their colour, the others are one series', async (t) => {
  const series = Array.from({ length: 30 }, (_, i) => ({ name: `Agent ${i}`, values: [i, 1] }))
  const kept = keepLargest(series, SERIES_COLOURS - 1, (s) => s.values[0] + s.values[1], (rest) => ({ name: `${rest.length} other agents`, values: [rest.reduce((n, s) => n + s.values[0], 0), rest.length] }))
  t.same(kept.map((s) => s.name), ['Agent 29', 'Agent 28', 'Agent 27', 'Agent 26', 'Agent 25', 'Agent 24', 'Agent 23', '23 other agents'])
  t.same(kept[7].values, [253, 23], 'the others summed per day')
  t.same(keepLargest([1, 2], 1, (n) => n, () => 0), [2, 1], 'one left over stays itself')
  const chart = stackedColumnChart({ ...text, categories: ['d1', 'd2'], series: kept }).value
  t.equal([...chart.matchAll(/<li><span class="swatch s(\d)">/g)].map((m) => m[1]).join(''), '01234567', 'a colour each')
  t.match(chart, '23 other agents')

  const wide = stackedColumnChart({ ...text, categories: Array.from({ length: 400 }, (_, i) => `d${i}`), series: Array.from({ length: 12 }, (_, i) => ({ name: `${i}`, values: Array(400).fill(1) })) }).value
  t.notMatch(wide, /NaN|Infinity/)
  t.ok([...wide.matchAll(/<text class="tick"[^>]*text-anchor="middle">/g)].length <= 6, 'at most 6 day labels')
  t.match(wide, 'class="bar s3"', 'series past the colours wrap around')
})

t.test('horizontal bars: widths in proportion, values beside them, kinds as classes', async (t) => {
  const chart = barChart({ ...text, bars: [{ label: 'Positive', value: 8, kind: 'positive' }, { label: 'Negative', value: 2, kind: 'negative' }, { label: 'Unknown', value: 0, kind: 'unknown' }] }).value
  t.same(sizes(chart, 'width'), [390, 97.5, 0])
  t.match(chart, 'class="bar positive"')
  t.match(chart, 'class="bar unknown"')
  t.match(chart, 'viewBox="0 0 640 92"', 'a row per bar')
  t.same(tableRows(chart), [['Positive', '8'], ['Negative', '2'], ['Unknown', '0']])
  t.equal(formatNumber(1234.567), '1,234.57')
})

t.test('axis labels: a short call\'s fraction of a minute is not rounded to 0; large values are compact', async (t) => {
  const { ticks } = niceScale(0.03)
  t.same(ticks.map(tickLabel), ['0', '0.01', '0.02', '0.03'], 'distinct labels below 1')
  t.equal(new Set(ticks.map(tickLabel)).size, ticks.length)
  t.equal(tickLabel(1_250), '1.3K')
  t.equal(tickLabel(35_000_000), '35M')
  t.equal(tickLabel(2.5), '2.5')
})
