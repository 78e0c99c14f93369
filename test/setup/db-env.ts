import path from 'node:path'

/** Written by start-db.ts before the run, loaded into every test process by tap's --env-file-if-exists. */
export const ENV_FILE = path.resolve(import.meta.dirname, '../../.tap/test-db.env')
