// The command line every script shares: node:util's parseArgs, `--help`, and one line for a mistake.
import { parseArgs, type ParseArgsConfig } from 'node:util'

/** A script as `npm run` names it (`seed`, `bench:calls`) and what `--help` prints. */
export interface Command { name: string, usage: string }

/**
 * The script's options and positionals. `--help` (or `-h`) prints the usage on stdout and exits 0 before
 * anything else runs (no database is opened); an unknown option, a missing value or an unexpected argument is
 * one line on stderr and exit code 2, never a stack trace.
 */
export function readArgs<T extends Omit<ParseArgsConfig, 'args' | 'strict'>> (command: Command, config: T) {
  const args = process.argv.slice(2)
  const options = args.includes('--') ? args.slice(0, args.indexOf('--')) : args
  if (options.includes('--help') || options.includes('-h')) {
    process.stdout.write(`${command.usage}\n`)
    process.exit(0)
  }
  try {
    return parseArgs({ ...config, args, strict: true as const })
  } catch (err) {
    if (!String((err as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS_')) throw err
    // Its first sentence names the mistake; the rest explains `--` to someone who meant an argument.
    usageError(command, (err as Error).message.split('\n')[0].split('. ')[0].replace(/\.$/, ''))
  }
}

/** A mistake on the command line: one line naming it, exit code 2. */
export function usageError (command: Command, message: string): never {
  process.stderr.write(`${command.name}: ${message} (npm run ${command.name} -- --help shows the usage)\n`)
  process.exit(2)
}
