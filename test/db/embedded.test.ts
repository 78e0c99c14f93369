import { execFile } from 'node:child_process'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { openEmbedded, toolFailure } from '../../src/db/embedded.ts'

t.test('a PostgreSQL tool that fails is quoted in the error', async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-embedded-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  // A cluster directory with something else in it: initdb refuses it.
  await mkdir(path.join(dataDir, 'postgres'))
  await writeFile(path.join(dataDir, 'postgres', 'notes.txt'), 'not a cluster')
  await t.rejects(openEmbedded(dataDir, { mode: 'shared' }), /^initdb failed in \S+: initdb: error: directory "\S+" exists but is not empty/)
})

t.test('a tool that cannot even be run is reported with the reason, not an empty message', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-embedded-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const tool = path.join(dir, 'initdb')
  await writeFile(tool, '', { mode: 0o644 })
  const err = await promisify(execFile)(tool, []).catch((e: unknown) => e)
  t.match(toolFailure(err), /EACCES/)
  const quiet = await promisify(execFile)('/bin/sh', ['-c', 'echo "said on stdout"; exit 3']).catch((e: unknown) => e)
  t.equal(toolFailure(quiet), 'said on stdout')
})
