import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'

export interface ScriptRun { code: number, stdout: string, stderr: string }

/**
 * Runs `scripts/<name>` on the database at `url` as `npm run` would (with `env` added to the environment),
 * answering its exit code and output.
 */
export async function runScript (name: string, on: string | { url: string, env: Record<string, string> }, ...args: string[]): Promise<ScriptRun> {
  const script = path.resolve(import.meta.dirname, '../../scripts', name)
  const { url, env } = typeof on === 'string' ? { url: on, env: {} } : on
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [script, ...args], { env: { ...process.env, ...env, DATABASE_URL: url } })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as ScriptRun
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}
