// ESLint flat config: neostandard (the community-maintained successor of `standard`, the style this code
// is written in) with its TypeScript rules. `npm run lint -- --fix` applies every fixable finding.
import neostandard, { resolveIgnoresFromGitignore } from 'neostandard'

export default [
  ...neostandard({ ts: true, noJsx: true, ignores: resolveIgnoresFromGitignore() }),
  {
    rules: {
      // Wide literals (lexicons, month names, row fixtures) wrap several properties per line; one property
      // a line would make them several times longer without making them easier to read.
      '@stylistic/object-property-newline': 'off',
      // `void promise` as a statement marks a deliberately unawaited promise (signal handlers, timers).
      'no-void': ['error', { allowAsStatement: true }],
      // A TypeBox schema and its type share a name (`const X = Type.Object(…)`, `type X = Static<typeof X>`);
      // tsc itself refuses a real redeclaration.
      '@typescript-eslint/no-redeclare': 'off'
    }
  }
]
