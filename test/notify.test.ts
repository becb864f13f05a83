/**
 * `--notify`, one vocabulary for loops, heartbeats and cron jobs (docs/CONTEXT.md, "Notify"): the
 * table row by row, the earlier cron word `failure` on input and in stored jobs, and the cron job's
 * reading of "the reply of the turn that finishes it" under `done`.
 */
import { describe, expect, it } from 'vitest';
import {
  NOTIFY_MODES,
  NOTIFY_WORDS,
  notifyDeliversReply,
  notifyKeepsQuiet,
  notifySendsNotices,
  notifyTellsSkips,
  parseNotify,
  readNotify,
} from '../scheduler/economy/notify.ts';
import { parseEconomyValue } from '../scheduler/economy/economy-flags.ts';
import { parseNotify as parseCronNotify } from '../scheduler/cron/cron-input.ts';
import { cronJobView, runDeliversReply, type CronJob, type CronRun, type NewCronJob } from '../scheduler/cron/cron-job.ts';
import { readCronJob } from '../scheduler/cron/cron-record-codec.ts';
import { cronJobFixture, cronRunFixture, FIXTURE_T0 } from './support/record-fixtures.ts';
import { runNotice } from '../scheduler/cron/cron-notice.ts';
import { ScheduleInputError } from '../scheduler/errors/schedule-input-error.ts';

const T0 = FIXTURE_T0;

describe('the vocabulary', () => {
  it('is auto, always, done and never, with failure accepted as auto, in any case', () => {
    expect(NOTIFY_MODES).toEqual(['auto', 'always', 'done', 'never']);
    expect(NOTIFY_WORDS).toEqual(['auto', 'always', 'done', 'never', 'failure']);
    for (const m of NOTIFY_MODES) expect(parseNotify(m.toUpperCase())).toBe(m);
    expect(parseNotify('failure')).toBe('auto');
    // The loops' flag parser and the cron jobs' field parser are the same one.
    expect(parseEconomyValue('--notify', 'failure')).toEqual({ notify: 'auto' });
    expect(parseEconomyValue('--notify', 'never')).toEqual({ notify: 'never' });
    expect(parseCronNotify('done')).toBe('done');
    expect(parseCronNotify(undefined)).toBe('auto');
  });

  it('refuses another word naming the modes, in the words of the surface asking', () => {
    expect(() => parseNotify('sometimes')).toThrow(
      new ScheduleInputError('--notify must be auto, always, done, never; got "sometimes".', { field: 'notify' }),
    );
    expect(() => parseCronNotify('constructor')).toThrow('`notify` must be auto, always, done, never; got "constructor".');
  });

  it('reads a stored mode: absent and failure are auto', () => {
    expect(readNotify(undefined)).toBe('auto');
    expect(readNotify('failure')).toBe('auto');
    expect(readNotify('done')).toBe('done');
  });
});

describe('the table', () => {
  const reply = (quiet: boolean, final: boolean) => ({ quiet, final });
  it.each([
    // mode, plain reply mid-way, quiet reply, final plain reply, notices, skips
    ['auto', true, false, true, true, false],
    ['always', true, true, true, true, true],
    ['done', false, false, true, true, false],
    ['never', true, false, true, false, false],
  ] as const)('%s', (mode, plain, quiet, final, notices, skips) => {
    expect(notifyDeliversReply(mode, reply(false, false))).toBe(plain);
    expect(notifyDeliversReply(mode, reply(true, false))).toBe(quiet);
    expect(notifyDeliversReply(mode, reply(false, true))).toBe(final);
    expect(notifyDeliversReply(mode, reply(true, true))).toBe(mode === 'always');
    expect(notifySendsNotices(mode)).toBe(notices);
    expect(notifyTellsSkips(mode)).toBe(skips);
    expect(notifyKeepsQuiet(mode, '[SILENT]')).toBe(mode !== 'always');
  });
});

describe('on a cron job', () => {
  const job = (over: Partial<NewCronJob> = {}): CronJob => cronJobFixture(over);
  const run = (over: Partial<CronRun> = {}): CronRun =>
    cronRunFixture('abcdefabcdef', T0, { occurrence_id: 'o1', output: 'hello', ...over });

  it('defaults to auto; a job stored with failure reads, shows and behaves as auto', () => {
    expect(job().notify).toBe('auto');
    const stored = readCronJob(JSON.stringify({ ...job(), notify: 'failure' }));
    expect(stored.notify).toBe('auto');
    expect(cronJobView({ ...job(), notify: 'failure' as never }).notify).toBe('auto');
    expect(runNotice(stored, run({ status: 'error', error: 'boom', output: null }), false)).toMatch(/failed: boom/);
  });

  it('done delivers only the reply of the run that completes the job: the last of --repeat N, a one-shot', () => {
    const repeat3 = { ...job({ notify: 'done', repeat: 3 }) };
    expect(runDeliversReply(repeat3, run())).toBe(false);
    expect(runDeliversReply({ ...repeat3, repeat: { times: 3, completed: 2 } }, run())).toBe(true);
    // A manual run never completes the job.
    expect(runDeliversReply({ ...repeat3, repeat: { times: 3, completed: 2 } }, run({ trigger: 'manual' }))).toBe(false);
    const once = job({ notify: 'done', schedule: { kind: 'once', expression: 'in 5m', display: 'once', atMs: T0 } });
    expect(runDeliversReply(once, run())).toBe(true);
    expect(runDeliversReply(job({ notify: 'auto' }), run())).toBe(true);
  });

  it('never sends no failure notice; always tells a skip, auto does not', () => {
    const failed = run({ status: 'error', error: 'boom', output: null });
    expect(runNotice(job({ notify: 'never' }), failed, false)).toBeNull();
    expect(runNotice(job({ notify: 'done' }), failed, false)).toMatch(/failed: boom/);
    const skipped = run({ status: 'skipped', reason: 'overlap', output: null });
    expect(runNotice(job({ notify: 'always' }), skipped, false)).toMatch(/skipped its run/);
    expect(runNotice(job({ notify: 'auto' }), skipped, false)).toBeNull();
  });
});
