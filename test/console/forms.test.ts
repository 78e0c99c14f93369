import t from 'tap'
import { Type, type TSchema } from 'typebox'
import { E164, Email, Nullable } from '../../src/http/schemas.ts'
import { AgentUpdate, DataRetrievalItem, LlmWrite } from '../../src/modules/agents/schemas.ts'
import {
  fieldValues, objectFields, pairValues, readFields, readPairs, readRows, renderFields, renderPairs, renderRows, rowValues, type Rows
} from '../../src/modules/console/forms.ts'

const Settings = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100, description: 'shown in lists' }),
  count: Type.Optional(Type.Integer({ minimum: 1, maximum: 5 })),
  ratio: Type.Number({ minimum: 0, maximum: 1 }),
  on: Type.Optional(Type.Boolean()),
  colour: Type.Union([Type.Literal('red'), Type.Literal('blue')]),
  engine: Type.Optional(Nullable(Type.Union([Type.Literal('a'), Type.Literal('b')]))),
  phones: Type.Optional(Type.Array(E164, { maxItems: 2 })),
  days: Type.Optional(Type.Array(Type.Union([Type.Literal('mon'), Type.Literal('tue')]))),
  email: Type.Optional(Nullable(Email)),
  note: Type.Optional(Type.String({ maxLength: 2000 }))
})

const fields = objectFields(Settings, 's.', { labels: { colour: 'Colour', phones: 'Phone numbers' } })

t.test('each member becomes the control its schema asks for, labelled, with the schema\'s description as hint', async (t) => {
  const page = renderFields(fields, fieldValues(fields, { name: 'A <b>', count: 3, ratio: 0.5, on: true, colour: 'blue', engine: null, phones: ['+14155550100'], days: ['tue'] }), {}).value
  t.match(page, '<label for="s-name">Name</label>\n<input id="s-name" name="s.name" type="text" value="A &lt;b&gt;" maxlength="100" required aria-describedby="s-name-hint">')
  t.match(page, '<p id="s-name-hint" class="hint">Shown in lists.</p>')
  t.match(page, /<input id="s-count" name="s.count" type="number" value="3" min="1" max="5" step="1"/)
  t.match(page, /<input id="s-ratio" name="s.ratio" type="number" value="0.5" min="0" max="1" step="any" required/)
  t.match(page, '<input type="checkbox" id="s-on" name="s.on" value="true" checked><input type="hidden" name="s.on" value="false"><label for="s-on">On</label>')
  // An enumeration's values made of words are shown as words (no_answer → No answer); the value sent stays.
  t.match(page, '<option value="blue" selected>Blue</option>')
  t.notMatch(page, /<select id="s-colour"[^>]*>\s*<option value="">/, 'a required enumeration offers no empty choice')
  t.match(page, /<select id="s-engine" name="s.engine">\s*<option value="" selected>None \(the default\)<\/option>/)
  t.match(page, /<textarea id="s-phones" name="s.phones" rows="3" aria-describedby="s-phones-hint">\n\+14155550100<\/textarea>/)
  t.match(page, '<p id="s-phones-hint" class="hint">One per line.</p>')
  t.match(page, '<input type="checkbox" id="s-days-tue" name="s.days.tue" value="true" checked><label for="s-days-tue">Tue</label>')
  t.match(page, /<input id="s-email" name="s.email" type="email"/)
  t.match(page, /<textarea id="s-note" name="s.note" rows="4" maxlength="2000">/, 'long text: a textarea')
})

t.test('what a form sends is read by the schemas: types, nulls, missing fields, one message per bad field', async (t) => {
  const good = readFields(fields, {
    's.name': ' Desk ', 's.count': '', 's.ratio': '0.25', 's.on': 'false', 's.colour': 'red', 's.engine': '', 's.phones': '+14155550100\r\n\r\n +14155550101 ',
    's.days': '', 's.days.mon': 'true', 's.days.tue': 'false', 's.email': '', 's.note': '  kept as typed '
  })
  t.same(good.problems, {})
  t.same(good.values, { name: 'Desk', count: null, ratio: 0.25, on: false, colour: 'red', engine: null, phones: ['+14155550100', '+14155550101'], days: ['mon'], email: null, note: '  kept as typed ' })
  t.same(readFields(fields, { 's.name': 'Only this' }).values, { name: 'Only this' }, 'a field missing from the form is left out')

  const bad = readFields(fields, { 's.name': '', 's.count': '9', 's.ratio': 'half', 's.colour': 'green', 's.phones': '+14155550100\n0800', 's.email': 'nobody' })
  t.same(bad.problems, {
    's.name': 'The name is required.',
    's.count': 'The count must be <= 5.',
    's.ratio': 'The ratio must be a number.',
    's.colour': 'The colour must be one of the listed choices.',
    's.phones': 'Line 2 of the phone numbers must be an E.164 phone number such as +14155550123.',
    's.email': 'The email must be an e-mail address.'
  })
})

t.test('options known at run time: a select whose value must be one of them', async (t) => {
  const [agent] = objectFields(Type.Object({ agent_id: Type.Optional(Type.String()) }), '', { options: { agent_id: [{ value: 'a1', label: 'Front <desk>' }] }, labels: { agent_id: 'Agent' } })
  t.match(renderFields([agent], { agent_id: 'a1' }, {}).value, '<option value="a1" selected>Front &lt;desk&gt;</option>')
  t.same(readFields([agent], { agent_id: 'a1' }).values, { agent_id: 'a1' })
  t.same(readFields([agent], { agent_id: 'zz' }).problems, { agent_id: 'The agent must be one of the listed choices.' })
})

t.test('rows: stored rows and a blank one; removed and empty rows are dropped; problems name the row', async (t) => {
  const Item = Type.Object({ name: Type.String({ minLength: 1 }), kind: Type.Union([Type.Literal('x'), Type.Literal('y')]), note: Type.Optional(Type.String()) })
  const rows: Rows = { name: 'items', legend: (i) => `Item ${i + 1}`, fields: (i) => objectFields(Item, `items.${i}.`) }
  const values = rowValues(rows, [{ name: 'first', kind: 'y' }], 1)
  t.equal(values.items, '2')
  const page = renderRows(rows, values, { 'items.1.name': 'The name is required.' }).value
  t.match(page, '<input type="hidden" name="items" value="2">')
  t.match(page, '<legend>Item 2</legend>')
  t.match(page, 'value="first"')
  t.match(page, '<label for="items-0-remove">Remove item 1</label>')
  t.match(page, '<p id="items-1-name-error" class="field-error">The name is required.</p>')

  t.same(readRows(rows, {}).rows, undefined, 'no list in the form: unchanged')
  const read = readRows(rows, { items: '4', 'items.0.name': 'a', 'items.0.kind': 'x', 'items.1.name': 'b', 'items.1.kind': 'y', 'items.1.remove': 'true', 'items.2.name': '', 'items.2.kind': 'x', 'items.3.name': 'd', 'items.3.kind': 'z' })
  t.same(read.rows, [{ index: 0, values: { name: 'a', kind: 'x' } }, { index: 3, values: { name: 'd' } }])
  t.same(read.problems, { 'items.3.kind': 'The kind must be one of the listed choices.' })
  t.equal(readRows(rows, { items: '1000000' }).rows?.length, 0, 'a forged count costs nothing')
})

t.test('write-only pairs: stored values never rendered, empty keeps, a box removes, new ones need a value', async (t) => {
  const headers = { name: 'h', noun: 'header', caption: 'Headers', keep: '****' }
  const values = pairValues(headers, { Authorization: 'Bearer secret-value' })
  const page = renderPairs(headers, values, {}).value
  t.notMatch(page, 'secret-value')
  t.match(page, '<code>Authorization</code>')
  t.match(page, 'aria-label="Remove Authorization"')
  t.match(page, 'aria-label="Name of header 2"')
  t.same(readPairs(headers, { ...values, 'h.0.value': '' }).value, { Authorization: '****' }, 'empty: keep the stored value')
  t.same(readPairs(headers, { ...values, 'h.0.value': 'Bearer new' }).value, { Authorization: 'Bearer new' })
  t.same(readPairs(headers, { ...values, 'h.0.remove': 'true' }).value, {})
  t.same(readPairs(headers, { ...values, 'h.1.name': 'X-Key' }).problems, { 'h.1.value': 'Give X-Key a value.' })
  t.same(readPairs(headers, { ...values, 'h.1.name': 'Authorization', 'h.1.value': 'x' }).problems, { 'h.1.name': 'Header Authorization is given twice.' })
  t.same(readPairs(headers, { ...values, 'h.1.value': 'orphan' }).problems, { 'h.1.name': 'Give this header a name.' })
  const proto = readPairs(headers, { h: '1', 'h.0.name': '__proto__', 'h.0.value': 'x' }).value!
  t.same(Object.keys(proto), ['__proto__'], 'a row named __proto__ is a row')
  t.equal(readPairs(headers, {}).value, undefined)

  const query = { name: 'q', noun: 'parameter', caption: 'Query' }
  const shown = pairValues(query, { page: '{{call_id}}' })
  t.match(renderPairs(query, shown, {}).value, 'value="{{call_id}}"', 'plain pairs show their values')
  t.same(readPairs(query, { ...shown, 'q.0.name': '', 'q.0.value': '' }).value, {}, 'clearing a row removes it')
})

t.test('a pattern is refused in words, never as the expression: every pattern of the agent form has its sentence', async (t) => {
  type Node = { pattern?: string, properties?: Record<string, Node>, anyOf?: Node[], items?: Node }
  /** Every member of the schemas whose text has a pattern, with the object it belongs to. */
  const patterned: Array<{ key: string, member: Node }> = []
  const walk = (node: Node, key: string) => {
    if (node.pattern !== undefined) patterned.push({ key, member: node })
    for (const [name, child] of Object.entries(node.properties ?? {})) walk(child, name)
    for (const branch of node.anyOf ?? []) walk(branch, key)
  }
  for (const schema of [AgentUpdate, LlmWrite, DataRetrievalItem]) walk(schema as Node, '')
  t.same(patterned.map(({ key }) => key).sort(), ['llm_id', 'name', 'primary_color', 'start', 'voice_id'], 'ids, the colour, a workflow\'s step id, a variable')
  for (const { key, member } of patterned) {
    const [field] = objectFields(Type.Object({ [key]: member as TSchema }), '')
    const problem = readFields([field], { [key]: 'not 1 valid!' }).problems[key]
    t.ok(problem, `${key} is refused`)
    t.notMatch(problem, /[$^[]|pattern|expected form/, `${key}: ${problem}`)
  }
  const [unknown] = objectFields(Type.Object({ code: Type.String({ pattern: '^[A-Z]{3}$' }) }), '')
  t.same(readFields([unknown], { code: 'x' }).problems, { code: 'The code is not in the expected form.' }, 'a pattern without words: still no expression')
})
