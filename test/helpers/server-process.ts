import { spawn, type ChildProcess } from 'node:child_process'
import path from 'node:path'

// The server as `npm start` runs it, in its own process: for the tests of starting, stopping and first use.

export const ROOT = path.resolve(import.meta.dirname, '../..')

export interface Server { child: ChildProcess, url: string, output: () => string, exited: Promise<number | null> }

/** Starts `node src/start.js` as `npm start` would and waits for its "listening on" line. */
export async function start (env: Record<string, string>, cwd = ROOT): Promise<Server> {
  const child = spawn(process.execPath, ['src/start.js'], {
    cwd,
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let output = ''
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const match = /listening on (http:\/\/[^"\s]+)/.exec(output)
      if (match !== null) resolve(match[1])
    }
    child.stdout!.on('data', onData)
    child.stderr!.on('data', onData)
    exited.then((code) => reject(new Error(`server exited with ${code} before listening:\n${output}`)))
  })
  return { child, url, output: () => output, exited }
}

export async function stop (server: Server): Promise<number | null> {
  server.child.kill('SIGTERM')
  return await server.exited
}
