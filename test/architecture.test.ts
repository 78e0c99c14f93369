// The layers of src/ (docs/architecture.md), read from the imports themselves: a lower layer never imports a
// higher one, modules depend on each other one way, no module imports another's routes, and no file takes
// part in an import cycle.
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import t from 'tap'

const SRC = path.resolve(import.meta.dirname, '../src')

/** From the bottom up; a file may import its own layer's files and those of the layers below. */
const LAYERS: string[][] = [
  ['config', 'logger', 'templates'],
  ['db'],
  ['http', 'jobs', 'mail'],
  ['net'],
  // Modules, each its own layer: a module imports only modules listed before it.
  ['modules/users'], ['modules/account'], ['modules/integrations'], ['modules/knowledge-bases'], ['modules/agents'],
  ['modules/phone-numbers'], ['modules/contacts'], ['modules/calls'], ['modules/messaging'], ['modules/appointments'], ['modules/capabilities'], ['modules/workflows'], ['modules/deliveries'], ['modules/runtime'], ['modules/voice'], ['modules/telephony'], ['modules/campaigns'], ['modules/widget'], ['modules/agent-tests'], ['modules/console'],
  // What composes the modules: the app, the process, the one place workers start (all beside main.ts).
  ['app', 'main', 'start', 'workers']
]

const files = (readdirSync(SRC, { recursive: true }) as string[])
  .filter((f) => /\.(ts|js)$/.test(f)).map((f) => f.split(path.sep).join('/'))

/** The unit a file belongs to: `modules/<name>`, a top-level folder or file. No file is an exception to its folder. */
function unit (file: string): string {
  const parts = file.replace(/\.(ts|js)$/, '').split('/')
  return parts[0] === 'modules' ? `modules/${parts[1]}` : parts[0]
}

const rank = new Map(LAYERS.flatMap((names, i) => names.map((name) => [name, i] as const)))

/** Relative imports (static and re-exports, type-only included: they tie the code together all the same). */
function importsOf (file: string): string[] {
  const text = readFileSync(path.join(SRC, file), 'utf8')
  const found = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+'(\.[^']+)'/g), ...text.matchAll(/import\(\s*'(\.[^']+)'\s*\)/g)]
  return found.map((m) => path.posix.normalize(path.posix.join(path.posix.dirname(file), m[1])))
    .filter((target) => !target.startsWith('..'))
}

const graph = new Map(files.map((file) => [file, importsOf(file)]))

t.test('every file of src/ belongs to a layer', async (t) => {
  t.same(files.filter((file) => !rank.has(unit(file))), [])
})

/** The imports of a graph that go up a layer, or sideways between two modules. */
function upward (imports: Map<string, string[]>): string[] {
  const wrong: string[] = []
  for (const [file, targets] of imports) {
    for (const target of targets) {
      const from = unit(file)
      const to = unit(target)
      if (from === to) continue
      const up = rank.get(to)! > rank.get(from)!
      const sideways = from.startsWith('modules/') && rank.get(to) === rank.get(from)
      if (up || sideways) wrong.push(`${file} -> ${target}`)
    }
  }
  return wrong
}

t.test('imports go down the layers, and between modules only to modules below', async (t) => {
  t.same(upward(graph), [], 'imports that go up a layer')
})

t.test('no module imports another module\'s routes', async (t) => {
  const wrong = [...graph].flatMap(([file, targets]) => targets
    .filter((target) => /(^|[-/])routes\.ts$/.test(target) && unit(target).startsWith('modules/') && unit(target) !== unit(file) && unit(file).startsWith('modules/'))
    .map((target) => `${file} -> ${target}`))
  t.same(wrong, [])
})

t.test('no import cycle between files', async (t) => {
  const state = new Map<string, 'open' | 'done'>()
  const cycles: string[] = []
  const visit = (file: string, trail: string[]): void => {
    if (state.get(file) === 'done') return
    if (state.get(file) === 'open') {
      cycles.push([...trail.slice(trail.indexOf(file)), file].join(' -> '))
      return
    }
    state.set(file, 'open')
    for (const target of graph.get(file) ?? []) visit(target, [...trail, file])
    state.set(file, 'done')
  }
  for (const file of files) visit(file, [])
  t.same(cycles, [])
})

t.test('the checks see what they check', async (t) => {
  // A check that read no imports would pass whatever the code did.
  t.ok(graph.get('modules/calls/lifecycle.ts')?.includes('modules/agents/queries.ts'), 'reads imports')
  t.ok([...graph.values()].flat().length > 200, 'reads all of them')
  // No exception for the helpers: jobs/ (or http/, mail/, db/) importing a module is an arrow back up.
  t.same(upward(new Map([
    ['jobs/queues.ts', ['modules/calls/workers.ts']],
    ['db/shapes.ts', ['modules/calls/lifecycle.ts']],
    ['workers.ts', ['modules/voice/workers.ts', 'jobs/queues.ts']],
    ['modules/calls/lifecycle.ts', ['db/shapes.ts', 'jobs/queues.ts']]
  ])), ['jobs/queues.ts -> modules/calls/workers.ts', 'db/shapes.ts -> modules/calls/lifecycle.ts'])
  t.notOk(files.some((file) => file.startsWith('jobs/') && graph.get(file)!.some((target) => target.startsWith('modules/'))), 'jobs/ imports no module')
})
