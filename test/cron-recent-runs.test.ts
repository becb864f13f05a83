/**
 * `hermes cron runs` without a job and `hermes cron status` read the recent
 * runs of all jobs: a removed job's entries must not shorten the answer.
 */
import { describe, expect, it } from 'vitest';
import type { CronJob } from '../scheduler/cron/cron-job.ts';
import { openCronService, openTestCron } from './support/cron-worker.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { cronJobFixture, cronRunFixture } from './support/record-fixtures.ts';

const cleanups = cleanupAfterEach();

/** Job `id`, named after it (names are unique), stored paused: its runs are the test's. */
function job(id: string, now: number): CronJob {
  return cronJobFixture({ id, name: `job-${id.slice(0, 4)}`, paused: true, now });
}

/** Record `count` runs of `id`, each one newer than the last, starting at `from`. */
async function recordRuns(api: ReturnType<typeof openCronService>, id: string, from: number, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const current = (await api.store.get(id))!;
    const res = await api.store.commitRun({
      run: cronRunFixture(id, from + i * 1000),
      job: current,
      expectedVersion: current.version,
      localEvent: null,
    });
    expect(res.status).toBe('committed');
  }
}

describe('recent runs after a job is removed', () => {
  it('cron runs --limit N and cron status still count N live runs when the newest entries belong to a removed job', async () => {
    const { api } = openTestCron(cleanups, { 'cron.history_limit': 200 });
    const now = Date.now();
    const kept = 'a'.repeat(12);
    const removed = 'b'.repeat(12);
    await api.store.put(job(kept, now), 'absent');
    await api.store.put(job(removed, now), 'absent');
    await recordRuns(api, kept, now, 120); // older
    await recordRuns(api, removed, now + 200_000, 110); // newest, then removed
    expect(await api.store.delete(removed)).toBe(true);

    const five = await api.service.runs(undefined, 5);
    expect(five).toHaveLength(5);
    expect(five.every((r) => r.job_id === kept)).toBe(true);
    expect(five[0]!.due_at).toBe(now + 119 * 1000); // newest first

    expect(await api.service.runs(undefined, 200)).toHaveLength(120);
    const status = await api.service.status();
    expect(status.lateness.runs).toBe(100); // "the last 100" runs
  });
});
