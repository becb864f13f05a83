/**
 * `CronStore.commitRun` records a run as the worker sent it: with a local reply, the `local` target is stored
 * delivered with the reply event's stream id as its evidence (put in by the commit script,
 * scheduler/store/redis/scripts/commit-cron-run-8.lua), and nothing else of the run changes.
 */
import { describe, expect, it } from 'vitest';
import { cronSessionId, type CronRun } from '../scheduler/cron/cron-job.ts';
import { openTestCron } from './support/cron-worker.ts';
import { cleanupAfterEach } from './support/cleanup.ts';
import { cronJobFixture, cronRunFixture } from './support/record-fixtures.ts';

const cleanups = cleanupAfterEach();

/** Job `id` stored paused (its runs are the test's), and its record as read back. */
async function storedJob(id: string) {
  const { api } = openTestCron(cleanups);
  await api.store.put(cronJobFixture({ id, name: 'commit', paused: true, now: Date.now() }), 'absent');
  return { api, current: (await api.store.get(id))! };
}

describe('a committed run, as stored', () => {
  it('with a local reply: the local target delivered with the event id as evidence, the rest of the run as sent', async () => {
    const id = 'c'.repeat(12);
    const { api, current } = await storedJob(id);
    const run: CronRun = cronRunFixture(id, Date.now(), {
      // Text shaped like the script's token (not this call's), and an empty list: stored as they are.
      output: 'evidence-0123456789abcdef0123456789abcdef "evidence" \\ \u00e9 \u2028',
      handoff: [],
      deliveries: [
        { target: 'local', status: 'pending' },
        { target: 'telegram:-1001:7', status: 'pending' },
      ],
    });
    const res = await api.store.commitRun({ run, job: current, expectedVersion: current.version, localEvent: { text: 'hi' } });
    expect(res.status).toBe('committed');
    const eventId = res.status === 'committed' ? res.eventId : null;
    expect(eventId).toMatch(/^\d+-\d+$/);
    // The event is on the job's session stream under that id.
    const events = await api.redis.xrange(api.keys.forCronJob(id).events(cronSessionId(id)), '-', '+');
    expect(events.map(([entryId]) => entryId)).toEqual([eventId]);

    const expected: CronRun = {
      ...run,
      deliveries: [
        { target: 'local', status: 'delivered', evidence: eventId! },
        { target: 'telegram:-1001:7', status: 'pending' },
      ],
    };
    expect(await api.store.getRun(id, run.occurrence_id)).toEqual(expected);
    expect(res.status === 'committed' && res.run).toEqual(expected);
  });

  it('without a local reply: the run stored exactly as sent, and no event', async () => {
    const id = 'd'.repeat(12);
    const { api, current } = await storedJob(id);
    const run = cronRunFixture(id, Date.now(), { deliveries: [{ target: 'local', status: 'pending' }] });
    const res = await api.store.commitRun({ run, job: current, expectedVersion: current.version, localEvent: null });
    expect(res).toMatchObject({ status: 'committed', eventId: null });
    expect(await api.store.getRun(id, run.occurrence_id)).toEqual(run);
    expect(await api.redis.exists(api.keys.forCronJob(id).events(cronSessionId(id)))).toBe(0);
  });
});
