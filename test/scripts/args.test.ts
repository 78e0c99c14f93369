import t, { type Test } from 'tap'
import { runScript } from '../helpers/scripts.ts'

// Every script's command line (scripts/args.ts): `--help` is the usage and exit 0, before any database is
// opened (none is given here); a mistake is one line and exit 2, never a stack trace.
const SCRIPTS = [
  ['cli.ts', 'cli'], ['seed.ts', 'seed'], ['migrate.ts', 'migrate'],
  ['bench-calls.ts', 'bench:calls'], ['bench-deliveries.ts', 'bench:deliveries'], ['bench-voice.ts', 'bench:voice'],
  ['bench-turns.ts', 'bench:turns']
] as const
const NO_DATABASE = 'postgres://nobody@127.0.0.1:9/none'

const oneLine = (t: Test, run: { code: number, stdout: string, stderr: string }, name: string, mistake: string) => {
  t.equal(run.code, 2, `${name}: exit code 2`)
  t.equal(run.stdout, '', `${name}: nothing on stdout`)
  t.equal(run.stderr, `${name}: ${mistake} (npm run ${name} -- --help shows the usage)\n`, `${name}: one line naming the mistake`)
}

t.test('--help prints the usage and exits 0; an unknown option or argument is one line and exit 2', async (t) => {
  for (const [file, name] of SCRIPTS) {
    for (const flag of ['--help', '-h']) {
      const help = await runScript(file, NO_DATABASE, flag)
      t.equal(help.code, 0, `${file} ${flag}`)
      t.match(help.stdout, /^usage:/, `${file} ${flag}: the usage on stdout`)
      t.equal(help.stderr, '', `${file} ${flag}: nothing on stderr`)
    }
    oneLine(t, await runScript(file, NO_DATABASE, '--no-such-option'), name, 'Unknown option \'--no-such-option\'')
  }
})

t.test('each script\'s own mistakes: a missing value, a value out of range, a stray argument', async (t) => {
  oneLine(t, await runScript('seed.ts', NO_DATABASE, '--calls'), 'seed', 'Option \'--calls <value>\' argument missing')
  oneLine(t, await runScript('seed.ts', NO_DATABASE, '--calls', '0'), 'seed', '--calls must be a whole number from 1 to 100000000, got 0')
  oneLine(t, await runScript('seed.ts', NO_DATABASE, '--calls', '--email', 'a@example.com'), 'seed', 'Option \'--calls\' argument is ambiguous')
  oneLine(t, await runScript('seed.ts', NO_DATABASE, 'extra'), 'seed', 'Unexpected argument \'extra\'')
  oneLine(t, await runScript('seed.ts', NO_DATABASE, '-z'), 'seed', 'Unknown option \'-z\'')
  oneLine(t, await runScript('migrate.ts', NO_DATABASE, 'now'), 'migrate', 'Unexpected argument \'now\'')
  oneLine(t, await runScript('cli.ts', NO_DATABASE, 'key', 'create', '--user'), 'cli', 'Option \'--user <value>\' argument missing')
  oneLine(t, await runScript('bench-deliveries.ts', NO_DATABASE, '--chaos=yes'), 'bench:deliveries', 'Option \'--chaos\' does not take an argument')
  oneLine(t, await runScript('bench-voice.ts', NO_DATABASE, '--engine', 'fast'), 'bench:voice', '--engine is cascade or realtime, got fast')
  oneLine(t, await runScript('bench-voice.ts', NO_DATABASE, '--transport', 'fax'), 'bench:voice', '--transport is browser or twilio, got fax')
  oneLine(t, await runScript('bench-voice.ts', NO_DATABASE, '--levels', '5,x'), 'bench:voice', '--levels is a list of call counts, e.g. 5,10')
})
