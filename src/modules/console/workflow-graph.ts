import type { Transition, Workflow, WorkflowStep } from '../agents/workflow.ts'
import { html, type SafeHtml } from './html.ts'

// A workflow drawn on the server as inline SVG, as the charts are (charts.ts): no script, no style attribute (the CSP
// forbids inline styles; colours come from classes in console.css). Steps are boxes laid out in layers by their
// distance from the start (breadth-first along the transitions; global steps not reached that way start a layer 0 of
// their own), edges are arrows labelled with their condition. The step list beside it says the same in text.

const BOX = { width: 168, height: 46 }
const GAP = { x: 36, y: 64 }
const MARGIN = 24
const MAX_NAME = 22
const MAX_LABEL = 26

const at = (n: number) => Math.round(n * 100) / 100
const shorten = (text: string, max: number) => text.length > max ? `${text.slice(0, max - 1)}…` : text

const TYPE_NAMES: Record<WorkflowStep['type'], string> = {
  conversation: 'Conversation',
  api_call: 'API call',
  message: 'Message',
  transfer: 'Transfer',
  end: 'End'
}

/** What a step's type is called in the console. */
export function typeName (step: WorkflowStep): string {
  return step.type === 'api_call' ? (step.run === 'after_call' ? 'API call after the call' : 'API call') : TYPE_NAMES[step.type]
}

/** A transition's condition in words, as an edge's label and in the step list. */
export function conditionText (condition: Transition['condition']): string {
  if (condition.type === 'always') return 'otherwise'
  if (condition.type === 'prompt') return `when ${condition.prompt}`
  return `if ${condition.expression}`
}

/** Each step's layer: its distance from the start; steps reached only from a global step count from that step. */
export function layers (workflow: Workflow): Map<string, number> {
  const byId = new Map(workflow.steps.map((step) => [step.id, step]))
  const depth = new Map<string, number>()
  const walk = (roots: string[]) => {
    const queue = roots.filter((id) => byId.has(id) && !depth.has(id))
    for (const id of queue) depth.set(id, 0)
    while (queue.length > 0) {
      const id = queue.shift()!
      for (const { to } of byId.get(id)!.transitions ?? []) {
        if (!byId.has(to) || depth.has(to)) continue
        depth.set(to, depth.get(id)! + 1)
        queue.push(to)
      }
    }
  }
  walk([workflow.start])
  walk(workflow.steps.filter((step) => step.global !== undefined).map((step) => step.id))
  // Whatever nothing reaches (a workflow the check would refuse) still shows, in a last layer.
  const last = Math.max(-1, ...depth.values()) + 1
  for (const step of workflow.steps) if (!depth.has(step.id)) depth.set(step.id, last)
  return depth
}

interface Box { step: WorkflowStep, x: number, y: number }

/** Room right of the boxes for the lanes of transitions back up (or within a layer), and their labels. */
const LANE = { gap: 14, label: 170 }

/** The graph of a workflow as an SVG image with a title and a description; `id` makes its ids unique in the page. */
export function workflowGraph (workflow: Workflow, id = 'workflow-graph'): SafeHtml {
  const depth = layers(workflow)
  const rows: WorkflowStep[][] = []
  for (const step of workflow.steps) (rows[depth.get(step.id)!] ??= []).push(step)
  const widest = Math.max(1, ...rows.map((row) => row.length))
  const boxesWidth = MARGIN * 2 + widest * BOX.width + (widest - 1) * GAP.x
  const height = MARGIN * 2 + rows.length * BOX.height + (rows.length - 1) * GAP.y
  const boxes = new Map<string, Box>()
  rows.forEach((row, layer) => {
    // Each layer centred.
    const used = row.length * BOX.width + (row.length - 1) * GAP.x
    row.forEach((step, i) => boxes.set(step.id, { step, x: (boxesWidth - used) / 2 + i * (BOX.width + GAP.x), y: MARGIN + layer * (BOX.height + GAP.y) }))
  })
  const edges: Drawn[] = []
  let lanes = 0
  for (const step of workflow.steps) {
    const from = boxes.get(step.id)!
    const outgoing = (step.transitions ?? []).flatMap((transition) => {
      const to = boxes.get(transition.to)
      return to === undefined ? [] : [{ to, text: conditionText(transition.condition) }]
    })
    // Arrows down leave the box's bottom in the order of their targets, left to right, so that they do not cross.
    const down = outgoing.filter(({ to }) => to.y > from.y).sort((a, b) => a.to.x - b.to.x)
    down.forEach(({ to, text }, i) => edges.push(downward(from, to, text, (i + 1) / (down.length + 1))))
    for (const { to, text } of outgoing.filter(({ to }) => to.y <= from.y)) edges.push(around(from, to, text, boxesWidth - MARGIN + LANE.gap * ++lanes))
  }
  const width = boxesWidth + (lanes === 0 ? 0 : LANE.gap * lanes + LANE.label)
  const nodes = [...boxes.values()].map(({ step, x, y }) => {
    const classes = ['step', step.type, step.id === workflow.start && 'start', step.global !== undefined && 'global'].filter(Boolean).join(' ')
    const note = [typeName(step), step.id === workflow.start && 'start', step.global !== undefined && 'global'].filter(Boolean).join(', ')
    return html`<g class="${classes}"><title>${step.name} (${note})</title>
<rect x="${at(x)}" y="${at(y)}" width="${BOX.width}" height="${BOX.height}" rx="8"/>
<text class="name" x="${at(x + BOX.width / 2)}" y="${at(y + 19)}" text-anchor="middle">${shorten(step.name, MAX_NAME)}</text>
<text class="kind" x="${at(x + BOX.width / 2)}" y="${at(y + 35)}" text-anchor="middle">${note}</text></g>`
  })
  const start = workflow.steps.find((step) => step.id === workflow.start)
  const count = workflow.steps.reduce((sum, step) => sum + (step.transitions ?? []).length, 0)
  return html`<svg class="workflow" width="${at(width)}" height="${at(height)}" viewBox="0 0 ${at(width)} ${at(height)}" role="img" aria-labelledby="${id}-title" aria-describedby="${id}-desc">
<title id="${id}-title">The workflow's steps and transitions</title>
<desc id="${id}-desc">${workflow.steps.length} step${workflow.steps.length === 1 ? '' : 's'} and ${count} transition${count === 1 ? '' : 's'}, starting at ${start?.name ?? workflow.start}; the step list says the same in text.</desc>
<defs><marker id="${id}-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>
${edges.map((drawn) => html`<g class="edge"><path d="${drawn.path}" marker-end="url(#${id}-arrow)"/><text x="${drawn.label.x}" y="${drawn.label.y}" text-anchor="${drawn.label.anchor}">${shorten(drawn.text, MAX_LABEL)}</text><title>${drawn.text}</title></g>`)}
${nodes}
</svg>`
}

interface Drawn { path: string, label: { x: number, y: number, anchor: 'middle' | 'start' }, text: string }

/** A point of a cubic Bézier curve at `t`. */
const bezier = (t: number, a: number, b: number, c: number, d: number) => (1 - t) ** 3 * a + 3 * (1 - t) ** 2 * t * b + 3 * (1 - t) * t ** 2 * c + t ** 3 * d

/** An arrow to a later layer: from the box's bottom (at `offset` of its width) to the top of the target; labelled near the target, where arrows from one box part. */
function downward (from: Box, to: Box, text: string, offset: number): Drawn {
  const x1 = from.x + BOX.width * offset
  const y1 = from.y + BOX.height
  const x2 = to.x + BOX.width / 2
  const y2 = to.y
  const middle = (y1 + y2) / 2
  return {
    path: `M${at(x1)},${at(y1)} C${at(x1)},${at(middle)} ${at(x2)},${at(middle)} ${at(x2)},${at(y2)}`,
    label: { x: at(bezier(0.7, x1, x1, x2, x2)), y: at(bezier(0.7, y1, middle, middle, y2) - 4), anchor: 'middle' },
    text
  }
}

/**
 * An arrow back up (a loop) or within a layer: down into the gap under its box, right to a lane of its own beside the
 * boxes, up to the gap over the target, and down into it; so it crosses no box. Labelled in its lane.
 */
function around (from: Box, to: Box, text: string, lane: number): Drawn {
  const x1 = from.x + BOX.width - 12
  const below = from.y + BOX.height + GAP.y / 3
  const x2 = to.x + BOX.width - 12
  const above = to.y - GAP.y / 3
  return {
    path: `M${at(x1)},${at(from.y + BOX.height)} V${at(below)} H${at(lane)} V${at(above)} H${at(x2)} V${at(to.y)}`,
    label: { x: at(lane + 4), y: at((below + above) / 2), anchor: 'start' },
    text
  }
}
