// A workflow transition's condition on the call's variables (docs/workflows.md, "Conditions"): `party_size > 8`,
// `{{insured}} = true`, `plan = "gold" and age >= 18`, `email is set`, `not (notes contains "urgent")`.
// A small hand-written parser, so that a stored expression can never run code; a length and a nesting limit keep
// a hostile expression from costing more than a few microseconds.

/** A parsed expression: the variables it reads, and its test on a call's variables. */
export type Condition = { names: string[], test: (variables: Record<string, unknown>) => boolean }

/** Longer than the schema's 300 characters, so that the schema speaks first in the API. */
export const MAX_EXPRESSION = 500
/** Parentheses and `not`s nested deeper than this are refused (the parser recurses once per level). */
const MAX_DEPTH = 20

type Token =
  | { kind: 'name', value: string }
  | { kind: 'literal', value: string | number | boolean | null }
  | { kind: 'op', value: string }
  | { kind: 'word', value: 'and' | 'or' | 'not' | 'contains' | 'is' | 'set' }
  | { kind: '(' | ')' }

type Operand = { kind: 'name', name: string } | { kind: 'literal', value: string | number | boolean | null }
type Node =
  | { kind: 'and' | 'or', left: Node, right: Node }
  | { kind: 'not', inner: Node }
  | { kind: 'compare', op: string, left: Operand, right: Operand }
  | { kind: 'set', operand: Operand }

const WORDS = new Set(['and', 'or', 'not', 'contains', 'is', 'set'])
const LITERALS: Record<string, boolean | null> = { true: true, false: false, null: null }
const TOKEN = /\s*(?:(\{\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\}\})|([A-Za-z_][A-Za-z0-9_]*)|(-?\d+(?:\.\d+)?)(?![A-Za-z0-9_])|"([^"]*)"|'([^']*)'|(==|!=|>=|<=|=|>|<)|([()]))/y

function tokenize (expression: string): Token[] | string {
  const tokens: Token[] = []
  let at = 0
  while (/\S/.test(expression.slice(at))) {
    TOKEN.lastIndex = at
    const match = TOKEN.exec(expression)
    if (match === null) {
      const start = at + (/^\s*/.exec(expression.slice(at))?.[0].length ?? 0)
      return `unexpected "${expression.slice(start, start + 20)}" at character ${start + 1}`
    }
    at = TOKEN.lastIndex
    const [, braced, word, number, double, single, op, paren] = match
    if (braced !== undefined) tokens.push({ kind: 'name', value: braced.slice(2, -2).trim() })
    else if (word !== undefined) {
      const lower = word.toLowerCase()
      if (Object.hasOwn(LITERALS, lower)) tokens.push({ kind: 'literal', value: LITERALS[lower] })
      else if (WORDS.has(lower)) tokens.push({ kind: 'word', value: lower as 'and' })
      else tokens.push({ kind: 'name', value: word })
    } else if (number !== undefined) tokens.push({ kind: 'literal', value: Number(number) })
    else if (double !== undefined || single !== undefined) tokens.push({ kind: 'literal', value: double ?? single })
    else if (op !== undefined) tokens.push({ kind: 'op', value: op === '==' ? '=' : op })
    else tokens.push({ kind: paren as '(' | ')' })
  }
  return tokens
}

class Parser {
  private at = 0
  readonly names = new Set<string>()
  private readonly tokens: Token[]
  constructor (tokens: Token[]) { this.tokens = tokens }

  private peek (): Token | undefined { return this.tokens[this.at] }
  private isWord (value: string) { const token = this.peek(); return token?.kind === 'word' && token.value === value }
  private describe (token: Token | undefined) {
    if (token === undefined) return 'the end'
    return `"${'value' in token ? String(token.value) : token.kind}"`
  }

  parse (): Node {
    if (this.tokens.length === 0) throw new Error('the expression is empty')
    const node = this.or(0)
    if (this.at < this.tokens.length) throw new Error(`unexpected ${this.describe(this.peek())}: expected "and", "or" or the end`)
    return node
  }

  private or (depth: number): Node {
    let node = this.and(depth)
    while (this.isWord('or')) { this.at++; node = { kind: 'or', left: node, right: this.and(depth) } }
    return node
  }

  private and (depth: number): Node {
    let node = this.unary(depth)
    while (this.isWord('and')) { this.at++; node = { kind: 'and', left: node, right: this.unary(depth) } }
    return node
  }

  private unary (depth: number): Node {
    if (depth > MAX_DEPTH) throw new Error(`nested deeper than ${MAX_DEPTH} levels`)
    if (this.isWord('not')) { this.at++; return { kind: 'not', inner: this.unary(depth + 1) } }
    if (this.peek()?.kind === '(') {
      this.at++
      const node = this.or(depth + 1)
      if (this.peek()?.kind !== ')') throw new Error(`unexpected ${this.describe(this.peek())}: expected ")"`)
      this.at++
      return node
    }
    return this.comparison()
  }

  private comparison (): Node {
    const left = this.operand()
    const token = this.peek()
    if (token?.kind === 'op') { this.at++; return { kind: 'compare', op: token.value as string, left, right: this.operand() } }
    if (this.isWord('contains')) { this.at++; return { kind: 'compare', op: 'contains', left, right: this.operand() } }
    if (this.isWord('is')) {
      this.at++
      const negated = this.isWord('not')
      if (negated) this.at++
      if (!this.isWord('set')) throw new Error(`unexpected ${this.describe(this.peek())}: expected "is set" or "is not set"`)
      this.at++
      const node: Node = { kind: 'set', operand: left }
      return negated ? { kind: 'not', inner: node } : node
    }
    throw new Error(`unexpected ${this.describe(token)} after ${left.kind === 'name' ? `"${left.name}"` : 'a value'}: expected a comparison (= != > >= < <=), "contains", "is set" or "is not set"`)
  }

  private operand (): Operand {
    const token = this.peek()
    if (token?.kind === 'name') { this.at++; this.names.add(token.value); return { kind: 'name', name: token.value } }
    if (token?.kind === 'literal') { this.at++; return { kind: 'literal', value: token.value } }
    throw new Error(`unexpected ${this.describe(token)}: expected a variable, a number, a "string", true, false or null`)
  }
}

/** A value given: neither absent, null nor empty text. */
const isSet = (value: unknown) => value !== undefined && value !== null && value !== ''

/** A number, or a text that is one (what a caller's answer collected as text may be). */
function numeric (value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined
  if (typeof value === 'string' && /^\s*-?\d+(\.\d+)?\s*$/.test(value)) return Number(value)
  return undefined
}

const asText = (value: unknown) => (typeof value === 'object' ? JSON.stringify(value) : String(value)).toLowerCase()

/** -1, 0 or 1: as numbers when both are, else as texts case-insensitively. */
function compare (left: unknown, right: unknown): number {
  const a = numeric(left)
  const b = numeric(right)
  if (a !== undefined && b !== undefined) return Math.sign(a - b)
  const x = asText(left)
  const y = asText(right)
  return x === y ? 0 : x < y ? -1 : 1
}

function evaluate (node: Node, variables: Record<string, unknown>): boolean {
  switch (node.kind) {
    case 'and': return evaluate(node.left, variables) && evaluate(node.right, variables)
    case 'or': return evaluate(node.left, variables) || evaluate(node.right, variables)
    case 'not': return !evaluate(node.inner, variables)
    case 'set': return isSet(value(node.operand, variables))
    case 'compare': {
      // null on either side asks whether the other is set: `x = null` holds when x is missing
      if (node.left.kind === 'literal' && node.left.value === null) return compareNull(node.op, value(node.right, variables))
      if (node.right.kind === 'literal' && node.right.value === null) return compareNull(node.op, value(node.left, variables))
      const left = value(node.left, variables)
      const right = value(node.right, variables)
      if (left === undefined || left === null || right === undefined || right === null) return false
      if (node.op === 'contains') {
        return Array.isArray(left) ? left.some((item) => compare(item, right) === 0) : asText(left).includes(asText(right))
      }
      const order = compare(left, right)
      switch (node.op) {
        case '=': return order === 0
        case '!=': return order !== 0
        case '>': return order > 0
        case '>=': return order >= 0
        case '<': return order < 0
        default: return order <= 0
      }
    }
  }
}

function compareNull (op: string, other: unknown): boolean {
  if (op === '=') return !isSet(other)
  if (op === '!=') return isSet(other)
  return false
}

function value (operand: Operand, variables: Record<string, unknown>): unknown {
  return operand.kind === 'literal' ? operand.value : Object.hasOwn(variables, operand.name) ? variables[operand.name] : undefined
}

/** An expression (`party_size > 8`, `{{insured}} = true`, `plan = "gold" and age >= 18`, `email is set`), or why not. */
export function parseCondition (expression: string): Condition | { error: string } {
  if (expression.length > MAX_EXPRESSION) return { error: `the expression is longer than ${MAX_EXPRESSION} characters` }
  const tokens = tokenize(expression)
  if (typeof tokens === 'string') return { error: tokens }
  const parser = new Parser(tokens)
  let node: Node
  try {
    node = parser.parse()
  } catch (error) {
    return { error: (error as Error).message }
  }
  return { names: [...parser.names], test: (variables) => evaluate(node, variables) }
}
