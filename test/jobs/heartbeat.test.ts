import { PgBoss } from 'pg-boss'
import t from 'tap'
import { createQueues, QUEUES, sendJob } from '../../src/jobs/queues.ts'
import { setup } from '../helpers/app.ts'
import { poll } from '../helpers/poll.ts'

// A job whose worker died (a killed process) is failed and retried once its heartbeat lapses
// (JOB_HEARTBEAT_SECONDS), not after pg-boss's 15-minute expiry: a campaign's contact or a call's deadline is not
// held that long.

t.test('every queue carries the heartbeat, and a queue of an earlier version is given it at start', async (t) => {
  const { boss, config } = await setup(t, { JOB_HEARTBEAT_SECONDS: '12' })
  for (const name of Object.values(QUEUES)) t.equal((await boss.getQueue(name))?.heartbeatSeconds, 12, name)
  // As a queue made before heartbeats were set.
  await boss.updateQueue(QUEUES.callDeadline, { heartbeatSeconds: null })
  t.equal((await boss.getQueue(QUEUES.callDeadline))?.heartbeatSeconds ?? null, null)
  await createQueues(boss, config)
  t.equal((await boss.getQueue(QUEUES.callDeadline))?.heartbeatSeconds, 12)
})

t.test('a deadline job held by a worker that died is retried once its heartbeat lapses', async (t) => {
  const { boss, url } = await setup(t, { JOB_HEARTBEAT_SECONDS: '10' })
  await sendJob(boss, undefined, QUEUES.callDeadline, { callId: 'c'.repeat(24), maxMs: 0 })
  // The dead worker: it took the job and will never refresh its heartbeat nor complete it.
  const [held] = await boss.fetch(QUEUES.callDeadline)
  t.ok(held, 'the job was taken')
  // A live process's supervisor, as a worker process runs it (src/jobs/boss.ts), checking every second.
  const supervisor = new PgBoss({ connectionString: url, supervise: true, superviseIntervalSeconds: 1, monitorIntervalSeconds: 1, schedule: false, max: 2 })
  supervisor.on('error', (err) => { t.error(err) })
  await supervisor.start()
  t.teardown(async () => { await supervisor.stop({ graceful: false }) })
  const job = await poll(async () => await boss.getJobById(QUEUES.callDeadline, held.id), (found) => found?.state === 'retry', { intervalMs: 250 })
  t.equal(job?.state, 'retry', 'it is to be attempted again')
  t.match(job?.output, { value: { message: 'job heartbeat timeout' } })
})
