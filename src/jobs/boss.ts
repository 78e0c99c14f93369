import { PgBoss } from 'pg-boss'
import type { Config } from '../config.ts'

/** The one pg-boss instance of a process. Maintenance and schedules run only where workers run. */
export function createBoss (connectionString: string, config: Config): PgBoss {
  return new PgBoss({
    connectionString,
    application_name: 'switchboard-jobs',
    // Wakes a worker ~5 ms after a job commits instead of at its next poll (>= 0.5 s).
    useListenNotify: true,
    supervise: config.role !== 'api',
    // Active jobs of a worker that died are found and retried within this many seconds after their heartbeat lapses
    // (JOB_HEARTBEAT_SECONDS) or they expire.
    superviseIntervalSeconds: 15,
    monitorIntervalSeconds: 15,
    schedule: config.role !== 'api',
    max: 4
  })
}
