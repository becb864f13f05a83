/**
 * Cron runs that fail and replies that are long (field reports F19, F20, and
 * failure notices): a failing job pauses after `cron.max_consecutive_failures`
 * runs in a row and says so, failed runs are told to the targets unless
 * `--notify never`, and a long reply reaches every target whole — Telegram
 * through the real gateway and grammY against the local Bot API server, a
 * webhook over loopback.
 */
import { createServer } from 'node:http';
import { describe, expect } from 'vitest';
import { startGateway } from '../gateway/gateway-process.ts';
import { applyRun, MAX_RUN_OUTPUT_CHARS, resumeCronJob, withReply, type CronJob, type CronRun } from '../scheduler/cron/cron-job.ts';
import { runNotice } from '../scheduler/cron/cron-notice.ts';
import { createLogger } from '../scheduler/logger.ts';
import { openCronService, openTestCron, startCronWorker } from './support/cron-worker.ts';
import { startFakeTelegram } from './support/fake-telegram.ts';
import { ALLOWED_USER, telegramEnv } from './support/telegram-env.ts';
import { waitFor } from './support/wait-for.ts';
import { it } from './support/cleanup.ts';
import { cronJobFixture, cronRunFixture, FIXTURE_T0 } from './support/record-fixtures.ts';

const cli = { origin: { surface: 'cli' as const }, trusted: true };

const T0 = FIXTURE_T0;
/** The fixture job, named so its notices can be read. */
const job = (over: Partial<CronJob> = {}): CronJob => ({ ...cronJobFixture({ name: 'nightly' }), ...over });
/** Run `n` of the job (due n minutes after T0): a skip is an overlap's, only a successful run has output. */
const run = (n: number, status: CronRun['status'], error: string | null = null): CronRun =>
  cronRunFixture('abcdefabcdef', T0 + n * 60_000, {
    status,
    reason: status === 'skipped' ? 'overlap' : null,
    output: status === 'ok' ? 'fine' : null,
    error,
  });

describe('cron failure streak and notices (pure)', () => {
  it('F19: cron.max_consecutive_failures failed runs in a row pause the job with the reason; success and resume reset', () => {
    const opts = { maxConsecutiveFailures: 3 };
    let j = applyRun(job(), run(1, 'error', 'exit 3'), T0, T0, opts);
    j = applyRun(j, run(2, 'ok'), T0, T0, opts);
    expect(j.failure_streak).toBe(0);
    for (let n = 3; n <= 4; n++) j = applyRun(j, run(n, 'error', 'exit 3'), T0, T0, opts);
    expect(j).toMatchObject({ state: 'scheduled', failure_streak: 2 });
    const paused = applyRun(j, run(5, 'error', 'exit 3: disk full'), T0, T0, opts);
    expect(paused).toMatchObject({
      state: 'paused',
      next_run_at: null,
      generation: j.generation + 1,
      failure_streak: 3,
      paused_reason: '3 failed runs in a row; last error: exit 3: disk full',
    });
    expect(resumeCronJob(paused, T0 + 10 * 60_000)).toMatchObject({ state: 'scheduled', failure_streak: 0, paused_reason: null });
    expect(applyRun(j, run(5, 'error', 'x'), T0, T0, { maxConsecutiveFailures: 0 }).state).toBe('scheduled');
  });

  it('failure notices name the job and the error and say how to inspect; --notify decides which runs send one', () => {
    const paused = applyRun(job({ failure_streak: 2 }), run(3, 'error', 'The model endpoint answered 500'), T0, T0, {
      maxConsecutiveFailures: 3,
    });
    expect(runNotice(paused, run(3, 'error', 'The model endpoint answered 500'), true)).toBe(
      [
        'Cron job "nightly" (abcdefabcdef) failed: The model endpoint answered 500',
        'Paused after 3 failed runs in a row; `hermes cron resume abcdefabcdef` continues.',
        '`hermes cron runs abcdefabcdef` shows its runs.',
      ].join('\n'),
    );
    expect(runNotice(job(), run(1, 'error', 'x'), false)).toMatch(/^Cron job "nightly" \(abcdefabcdef\) failed: x\n`hermes cron runs/);
    expect(runNotice(job({ notify: 'never' }), run(1, 'error', 'x'), false)).toBeNull();
    expect(runNotice(job(), run(1, 'skipped'), false)).toBeNull();
    expect(runNotice(job({ notify: 'always' }), run(1, 'skipped'), false)).toBe(
      'Cron job "nightly" (abcdefabcdef) skipped its run due 2026-03-04T10:01:00Z: the previous run was still going.',
    );
    expect(runNotice(job({ notify: 'always' }), run(1, 'ok'), false)).toBeNull();
  });

  it('F20: the record keeps a capped copy; the delivered text is the whole reply', () => {
    const long = 'x'.repeat(12_000);
    const r = withReply(run(1, 'ok'), long);
    expect(r.output).toBe(`${'x'.repeat(MAX_RUN_OUTPUT_CHARS)}\n[output cut]`);
    expect(r.delivery_text).toBe(long);
    expect(withReply(run(1, 'ok'), 'short').delivery_text).toBeUndefined();
  });
});

// The two describes below each have their own Redis prefix, workers and servers, so they run side by side
// (most of their time is spent waiting for runs 1 s apart).
describe.concurrent('cron runs that keep failing (real BullMQ)', () => {
  it('F19: a job failing every run is paused after 3 in a row, visible in cron status; each failure is delivered as a notice', async ({
    cleanups,
    expect,
  }) => {
    const { env, api } = openTestCron(cleanups, { 'cron.min_interval_seconds': 1 });
    const w = await startCronWorker(env.config);
    cleanups.push(() => w.close());
    const failing = await api.service.add({ schedule: 'every 1s', script: 'echo "disk full" >&2; exit 3', name: 'disk' }, cli);
    const quiet = await api.service.add({ schedule: 'every 1s', script: 'exit 4', name: 'quiet', notify: 'never' }, cli);
    await waitFor(
      async () => (await api.store.get(failing.id))?.state === 'paused' && (await api.store.get(quiet.id))?.state === 'paused',
      15_000,
      'both paused',
    );

    const paused = (await api.store.get(failing.id))!;
    expect(paused).toMatchObject({
      failure_streak: 3,
      paused_reason: expect.stringMatching(/^3 failed runs in a row; last error: .*code 3: disk full/),
    });
    expect(await api.store.schedulerNext(failing.id)).toBeUndefined();
    const status = await api.service.status();
    expect(status.failing).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: failing.id, failure_streak: 3, state: 'paused', paused_reason: paused.paused_reason }),
      ]),
    );
    expect(status.jobs.paused).toBe(2);
    expect((await api.service.doctor()).map((f) => f.message)).toContain(
      `paused after ${paused.paused_reason}; \`hermes cron resume ${failing.id}\` continues.`,
    );

    // (an occurrence skipped as overlapping on a loaded machine neither counts nor breaks the streak)
    const runs = (await api.store.runs(failing.id, 10)).filter((r) => r.status !== 'skipped');
    expect(runs.map((r) => r.status)).toEqual(['error', 'error', 'error']);
    await waitFor(
      async () => (await api.store.runs(failing.id, 10)).every((r) => r.deliveries.every((d) => d.status !== 'pending')),
      5_000,
      'notices delivered',
    );
    const notices = (await w.deps.sessions.readEvents(`cron:${failing.id}`, '0', { count: 100 })).map((e) => String(e.data.text));
    expect(notices).toHaveLength(3);
    expect(notices[0]).toMatch(
      new RegExp(`^Cron job "disk" \\(${failing.id}\\) failed: .*disk full\n\`hermes cron runs ${failing.id}\` shows its runs\\.$`),
    );
    expect(notices[2]).toMatch(/\nPaused after 3 failed runs in a row; `hermes cron resume [0-9a-f]{12}` continues\./);
    // --notify never: failures recorded, nothing delivered
    expect((await api.store.runs(quiet.id, 10)).every((r) => r.deliveries.length === 0)).toBe(true);
    expect(await w.deps.sessions.readEvents(`cron:${quiet.id}`, '0', { count: 100 })).toEqual([]);

    const resumed = await api.service.resume(failing.id, { origin: { surface: 'cli' }, trusted: true });
    expect(resumed.job).toMatchObject({ state: 'scheduled', failure_streak: 0, paused_reason: null });
  });
});

describe.concurrent('long replies', () => {
  it('F20: a 12,000-character reply reaches Telegram as 3 complete messages in order, and a webhook whole', async ({
    cleanups,
    expect,
  }) => {
    const fake = await startFakeTelegram();
    cleanups.push(() => fake.close());
    const env = telegramEnv(fake, { 'cron.min_interval_seconds': 1, 'delivery.webhook_allow': ['127.0.0.1'] });
    cleanups.push(() => env.cleanup());
    const received: string[] = [];
    const hook = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push(String((JSON.parse(body) as { output: string }).output));
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => hook.listen(0, '127.0.0.1', () => r()));
    cleanups.push(() => new Promise<void>((r) => hook.close(() => r())));
    const api = openCronService(env.config);
    cleanups.push(() => api.close());
    const w = await startCronWorker(env.config);
    cleanups.push(() => w.close());
    const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log: createLogger({ level: 'silent' }) });
    cleanups.push(() => gw.close());

    // 120 lines of 100 characters: "line 0001 xxx…x\n"
    const script = `for i in $(seq 1 120); do printf 'line %04d %s\\n' "$i" "$(printf 'x%.0s' $(seq 1 89))"; done`;
    const port = (hook.address() as { port: number }).port;
    const job = await api.service.add(
      { schedule: 'in 1s', script, name: 'report', deliver: `telegram:${ALLOWED_USER},http://127.0.0.1:${port}/hook` },
      cli,
    );
    await waitFor(() => fake.sent.length >= 3 && received.length >= 1, 20_000, 'three Telegram messages and the webhook');

    const whole = received[0]!;
    expect(whole.length).toBeGreaterThanOrEqual(11_999);
    expect(whole.startsWith('line 0001 x')).toBe(true);
    expect(whole.trimEnd().endsWith(`line 0120 ${'x'.repeat(89)}`)).toBe(true);
    expect(fake.sent).toHaveLength(3);
    expect(fake.sent.every((m) => m.text.length <= 4096 && m.chat_id === String(ALLOWED_USER))).toBe(true);
    expect(fake.sent.map((m) => m.text).join('')).toBe(whole);
    const [record] = await api.store.runs(job.id, 1);
    expect(record!.output!.endsWith('\n[output cut]')).toBe(true);
    expect(record!.output!.length).toBeLessThanOrEqual(MAX_RUN_OUTPUT_CHARS + 13);
    await waitFor(
      async () => (await api.store.runs(job.id, 1))[0]?.deliveries.every((d) => d.status !== 'pending'),
      5_000,
      'deliveries recorded',
    );
    expect((await api.store.runs(job.id, 1))[0]!.delivery_text).toBeUndefined();
  });
});
