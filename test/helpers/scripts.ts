import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'

export interface ScriptRun { code: number, stdout: string, stderr: string }

/** Runs `scripts/<name>` on the database at `url` as `npm run` would, answering its exit code and output. */
export async function runScript (name: string, url: string, ...args: string[]): Promise<ScriptRun> {
  const script = path.resolve(import.meta.dirname, '../../scripts', name)
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [script, ...args], { env: { ...process.env, DATABASE_URL: url } })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as ScriptRun
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}
