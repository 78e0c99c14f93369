import path from 'node:path'

/** Written by start-db.ts before the run, loaded into every test process by tap's --env-file-if-exists. */
export const ENV_FILE = path.resolve(import.meta.dirname, '../../.tap/test-db.env')

/** The secrets key of every test process and of the servers and scripts they start (SECRETS_KEY). */
export const TEST_SECRETS_KEY = Buffer.alloc(32, 7).toString('base64')
