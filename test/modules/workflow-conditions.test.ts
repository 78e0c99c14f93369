import t from 'tap'
import { MAX_EXPRESSION, parseCondition, type Condition } from '../../src/modules/agents/conditions.ts'

function parsed (expression: string): Condition {
  const condition = parseCondition(expression)
  if ('error' in condition) throw new Error(`${expression}: ${condition.error}`)
  return condition
}

t.test('comparisons on numbers, texts and booleans', async (t) => {
  const party = parsed('party_size > 8')
  t.same(party.names, ['party_size'])
  t.equal(party.test({ party_size: 9 }), true)
  t.equal(party.test({ party_size: 8 }), false)
  t.equal(party.test({ party_size: '12' }), true, 'a numeric text compares as a number')
  t.equal(party.test({ party_size: '10' }), true, 'not as text ("10" < "8")')
  t.equal(party.test({}), false, 'a missing variable compares false')
  t.equal(party.test({ party_size: null }), false)

  const insured = parsed('{{insured}} = true')
  t.same(insured.names, ['insured'])
  t.equal(insured.test({ insured: true }), true)
  t.equal(insured.test({ insured: 'TRUE' }), true, 'texts compare case-insensitively')
  t.equal(insured.test({ insured: false }), false)

  const plan = parsed('plan = "Gold" and age >= 18')
  t.same(plan.names.sort(), ['age', 'plan'])
  t.equal(plan.test({ plan: 'gold', age: 18 }), true)
  t.equal(plan.test({ plan: 'gold', age: 17 }), false)
  t.equal(plan.test({ plan: 'silver', age: 40 }), false)

  t.equal(parsed("city != 'Berlin'").test({ city: 'berlin' }), false)
  t.equal(parsed("city != 'Berlin'").test({ city: 'Hamburg' }), true)
  t.equal(parsed("city != 'Berlin'").test({}), false, 'even != is false on a missing variable')
  t.equal(parsed('score <= -1.5').test({ score: -2 }), true)
  t.equal(parsed('score < 3').test({ score: 3 }), false)
  t.equal(parsed('name < "m"').test({ name: 'Anna' }), true, 'texts ordered case-insensitively')
  t.equal(parsed('a == b').test({ a: 2, b: '2.0' }), true, '== is =, two variables compared')
})

t.test('contains, is set, and/or/not and parentheses', async (t) => {
  const notes = parsed('notes contains "urgent"')
  t.equal(notes.test({ notes: 'This is URGENT please' }), true)
  t.equal(notes.test({ notes: 'whenever' }), false)
  t.equal(notes.test({}), false)
  t.equal(parsed('tags contains "vip"').test({ tags: ['new', 'VIP'] }), true, 'a list contains an item')

  const email = parsed('email is set')
  t.equal(email.test({ email: 'a@b.c' }), true)
  t.equal(email.test({ email: '' }), false, 'empty text is not set')
  t.equal(email.test({ email: null }), false)
  t.equal(email.test({}), false)
  t.equal(parsed('email is not set').test({}), true)
  t.equal(parsed('email IS NOT SET').test({ email: 'x' }), false, 'words in any case')
  t.equal(parsed('email = null').test({}), true, '= null means not set')
  t.equal(parsed('email != null').test({ email: 'x' }), true)

  const mixed = parsed('not (a = 1 or b = 2) and c is set')
  t.equal(mixed.test({ a: 3, b: 3, c: 'x' }), true)
  t.equal(mixed.test({ a: 1, b: 3, c: 'x' }), false)
  t.equal(mixed.test({ a: 3, b: 3 }), false)
  // and binds tighter than or
  const precedence = parsed('a = 1 or b = 1 and c = 1')
  t.equal(precedence.test({ a: 1 }), true)
  t.equal(precedence.test({ b: 1 }), false)
  t.equal(precedence.test({ b: 1, c: 1 }), true)
  t.equal(parsed('not not a = 1').test({ a: 1 }), true)
})

t.test('refusals say why', async (t) => {
  const errors: Array<[string, RegExp]> = [
    ['', /empty/],
    ['   ', /empty/],
    ['party_size >', /expected a variable/],
    ['party_size 8', /expected a comparison/],
    ['party_size', /expected a comparison/],
    ['a = 1 and', /expected a variable/],
    ['(a = 1', /expected "\)"/],
    ['a = 1)', /unexpected "\)"/],
    ['a = "open', /unexpected ""open" at character 5/],
    ['a ~ 1', /unexpected "~ 1" at character 3/],
    ['a is 3', /"is set" or "is not set"/],
    ['a = 1 b = 2', /expected "and", "or"/],
    ['x'.repeat(MAX_EXPRESSION + 1), /longer than/],
    ['constructor = 1 and toString is set', /^$/] // not an error: plain names
  ]
  for (const [expression, reason] of errors) {
    const result = parseCondition(expression)
    if (reason.source === '^$') {
      t.notOk('error' in result, 'names of Object.prototype are plain variables')
      t.equal((result as Condition).test({}), false)
      continue
    }
    t.match(result, { error: reason }, expression.slice(0, 40))
  }
})

t.test('no recursion bomb: deep nesting is refused quickly', async (t) => {
  const deep = '('.repeat(200) + 'a = 1' + ')'.repeat(200)
  t.match(parseCondition(deep.slice(0, MAX_EXPRESSION)), { error: /nested deeper than/ })
  t.match(parseCondition('not '.repeat(120)), { error: /nested deeper than/ })
  const ok = '('.repeat(10) + 'a = 1' + ')'.repeat(10)
  t.equal(parsed(ok).test({ a: 1 }), true)
  // the longest chain of and/or allowed parses (no recursion per operator)
  const chain = Array.from({ length: 30 }, (_, i) => `v${i} = ${i}`).join(' or ')
  t.ok(chain.length <= MAX_EXPRESSION)
  t.equal(parsed(chain).test({ v29: 29 }), true)
})
