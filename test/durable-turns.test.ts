/**
 * Durable turns (docs/RELIABILITY.md, "A turn resumes from its journal"): the only worker is
 * SIGKILLed in the middle of an agent turn, after its tool call ran and while its next model call is
 * in flight; a new worker resumes the turn from its journal — the tool does not run again, the
 * model is not asked the turn's first request again, and one reply is committed.
 *
 * Real processes (`hermes worker` children), real Redis, the local model server; every wait is on
 * an observed event (a request the model server received, a session event), never a fixed sleep.
 */
import { describe } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PRODUCT_LOCK, testEnv, type TestEnv } from './support/env.ts';
import { clients, events, spawnWorker, startWorker, waitFor, waitForEvents } from './support/stack.ts';
import {
  lastToolResult,
  lastUserText,
  startFakeOpenAI,
  type FakeOpenAI,
  type RecordedRequest,
  type ScriptedReply,
} from './support/fake-openai.ts';
import { it, type CleanUp } from './support/cleanup.ts';
import { IN_DOUBT_ERROR, inDoubtText } from '../worker/turn-runners/agent-runner.ts';
import { loadConfig } from '../scheduler/config/config.ts';
import { Toolbox } from '../worker/tools/toolbox.ts';
import type { ScheduleStatusSources } from '../worker/tools/schedule-status-tool.ts';
import { cronServiceFor } from '../scheduler/services.ts';
import { createLogger } from '../scheduler/logger.ts';
import { startAgentStack } from './support/agent-stack.ts';
import type { TranscriptMessage } from '../scheduler/session/session-store.ts';
import { lines, waitForFile } from './support/child-processes.ts';

/**
 * The home of `hermes worker` children: `config.yaml` declares `tools` (written before any worker
 * starts), the environment points them at the model server. A worker killed hands its job over once the
 * suite's job lock (`TEST_LOCK_MS`) lapsed; a test about a live worker losing its lock passes `PRODUCT_LOCK`.
 * Beside two other copies of the suite, the product's 3 s lock also lapsed under the live second worker, whose
 * turn then ran again (a command `on_doubt: rerun` three times where twice is asserted).
 */
function workerEnv(
  cleanups: CleanUp[],
  model: FakeOpenAI,
  tools: (home: string) => Record<string, unknown>,
  lock: Readonly<Record<string, unknown>> = {},
): TestEnv {
  const env = testEnv({ ...lock, 'agent.base_url': model.baseUrl, 'agent.api_key': 'k' });
  cleanups.push(() => env.cleanup());
  writeFileSync(join(env.home, 'config.yaml'), JSON.stringify({ tools: tools(env.home) }), { mode: 0o600 });
  return env;
}

/** A worker environment whose operator command `append` appends `appended <HERMES_STEP_ID>` to `file`. */
function appendEnv(cleanups: CleanUp[], model: FakeOpenAI, lock: Readonly<Record<string, unknown>> = {}): { env: TestEnv; file: string } {
  const env = workerEnv(
    cleanups,
    model,
    (home) => ({
      commands: {
        append: { command: `echo "appended $HERMES_STEP_ID" >> ${join(home, 'side-effect.txt')}`, description: 'appends a line' },
      },
    }),
    lock,
  );
  return { env, file: join(env.home, 'side-effect.txt') };
}

/** A model that holds its answers to requests until the test ends (`release`), and answers `late`. */
function holding(cleanups: CleanUp[]): { hold: () => Promise<ScriptedReply> } {
  const held: Array<(r: ScriptedReply) => void> = [];
  cleanups.push(() => held.forEach((r) => r('late')));
  return { hold: () => new Promise<ScriptedReply>((r) => held.push(r)) };
}

// Up to 180 s a test: two `hermes worker` starts (each up to 45 s on a loaded machine, SPAWN_START_TIMEOUT_MS)
// and the waits for the turn between them did not fit in the default 60 s.
describe.concurrent('durable turns', { timeout: 420_000 }, () => {
  it("SIGKILL while the model's second call is in flight → a new worker resumes the turn: one reply, the command ran once, the first request was not sent again", async ({
    cleanups,
    expect,
  }) => {
    const model = await startFakeOpenAI();
    cleanups.push(() => model.close());
    const { hold } = holding(cleanups); // pushed after the close: released first
    const { env, file } = appendEnv(cleanups, model);
    let secondCalls = 0;
    model.respond((req) => {
      if (lastToolResult(req) === undefined) {
        // The turn's first request: a model that takes 3 s, then asks for the command.
        return new Promise((r) => setTimeout(() => r({ toolCalls: [{ name: 'append' }] }), 3000));
      }
      // Its second: in flight on the first worker (never answered there), answered on the second.
      return ++secondCalls === 1 ? hold() : 'Appended the line.';
    });
    const c = clients(env);
    cleanups.push(() => c.close());
    const a = await spawnWorker(cleanups, env);
    await c.schedules.set(
      'durable',
      'loop',
      { prompt: 'append a line to the file', intervalSeconds: 30, times: 1, until: null, notes: [] },
      { origin: { surface: 'cli' }, runner: { kind: 'agent' } },
    );
    const [started] = await waitForEvents(c, 'durable', 'tick.started', 1, 90_000);
    expect(started!.data.pid).toBe(a.pid);
    const occurrence = String(started!.data.occurrenceId);
    // The command ran and the second model call is in flight: the worker dies now.
    await waitFor(
      () => (model.requests.filter((r) => lastToolResult(r) !== undefined).length === 1 ? true : undefined),
      90_000,
      'the second call',
    );
    expect(lines(file)).toHaveLength(1);
    a.kill('SIGKILL');
    await new Promise((r) => a.once('exit', r));

    const b = await spawnWorker(cleanups, env);
    const [reply] = await waitForEvents(c, 'durable', 'reply', 1, 60_000);
    expect(reply!.data).toMatchObject({ occurrenceId: occurrence, text: 'Appended the line.', pid: b.pid });
    await waitFor(async () => ((await c.loops.get('durable', 'loop'))?.status === 'finished' ? true : undefined), 15_000, 'loop finished');

    // The side effect happened once, under the step id of the turn's first call.
    expect(lines(file)).toEqual([`appended ${occurrence}:1`]);
    // No model call repeated but the one cut by the kill: the first request once, the second twice (cut, then resumed).
    const firsts = model.requests.filter((r) => lastToolResult(r) === undefined);
    const seconds = model.requests.filter((r) => lastToolResult(r) !== undefined);
    expect(firsts).toHaveLength(1);
    expect(seconds).toHaveLength(2);
    // The resumed call carries the recorded answer and result: the same request as the one cut.
    expect(seconds[1]!.messages).toEqual(seconds[0]!.messages);
    expect(await events(c, 'durable', 'reply')).toHaveLength(1);
    const transcript = await c.sessions.transcript('durable');
    expect(transcript.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    // The journal went with the commit.
    expect(await c.redis.exists(c.keys.turnJournal('durable', occurrence))).toBe(0);
  });

  it('a worker stalled (SIGSTOP) past its lock during the second model call → another worker resumes the turn; woken, the stalled copy does nothing more: one reply, the command ran once', async ({
    cleanups,
    expect,
  }) => {
    const model = await startFakeOpenAI();
    cleanups.push(() => model.close());
    const { env, file } = appendEnv(cleanups, model, PRODUCT_LOCK);
    // The stalled copy's second call is answered only once it is awake again, and asks for the command once more.
    let answerStalled!: (r: ScriptedReply) => void;
    const stalledAnswer = new Promise<ScriptedReply>((r) => (answerStalled = r));
    cleanups.push(() => answerStalled('late'));
    let secondCalls = 0;
    model.respond((req) => {
      if (lastToolResult(req) === undefined) return { toolCalls: [{ name: 'append' }] };
      return ++secondCalls === 1 ? stalledAnswer : 'Appended the line.';
    });
    const c = clients(env);
    cleanups.push(() => c.close());
    const a = await spawnWorker(cleanups, env);
    cleanups.push(() => void a.kill('SIGCONT'));
    await c.schedules.set(
      'stalled',
      'loop',
      { prompt: 'append a line to the file', intervalSeconds: 30, times: 1, until: null, notes: [] },
      { origin: { surface: 'cli' }, runner: { kind: 'agent' } },
    );
    await waitFor(() => (secondCalls === 1 ? true : undefined), 90_000, 'the second call');
    a.kill('SIGSTOP');
    const b = await spawnWorker(cleanups, env);
    const [reply] = await waitForEvents(c, 'stalled', 'reply', 1, 90_000);
    expect(reply!.data).toMatchObject({ text: 'Appended the line.', pid: b.pid });

    // Woken, the stalled copy's model call is answered with a tool call: it must not run it.
    const wokeAt = Date.now();
    a.kill('SIGCONT');
    const beat = async (after: number) =>
      await waitFor(
        async () => {
          const members = await c.redis.zrange(c.keys.workers, 0, -1, 'WITHSCORES');
          const i = members.findIndex((m) => m.includes(`:${a.pid}:`));
          return i >= 0 && Number(members[i + 1]) > after ? true : undefined;
        },
        20_000,
        'the stalled worker running again',
      );
    await beat(wokeAt);
    const answeredAt = Date.now();
    answerStalled({ toolCalls: [{ name: 'append' }] });
    await beat(answeredAt);
    await waitFor(async () => ((await c.loops.get('stalled', 'loop'))?.status === 'finished' ? true : undefined), 15_000, 'loop finished');
    expect(lines(file)).toHaveLength(1);
    expect(await events(c, 'stalled', 'reply')).toHaveLength(1);
    expect(model.requests.filter((r) => lastToolResult(r) === undefined)).toHaveLength(1);
  });

  it(
    "a cron run's agent turn: SIGKILL while the model's second call is in flight → the run resumes on a new worker, the command ran once, one run recorded",
    {
      timeout: 420_000,
    },
    async ({ cleanups, expect }) => {
      // The scenario needs the first worker to hold its job until the kill. A worker starved past its lock (the
      // suite beside two copies of itself, on the product's 3 s lock) fenced its own turn off before that, killing
      // the command before it ran; its retry then found the call in doubt and sent the second request without
      // running it again (the rule of a lost lock, asserted elsewhere). Such a run says nothing of the kill:
      // it is started afresh, up to three times.
      for (let attempt = 1; ; attempt++) {
        const run = await cronRunKilledInSecondCall(cleanups);
        if (run.inDoubt && attempt < 3) {
          run.b.kill('SIGKILL');
          continue;
        }
        const { model, file, cron, jobId } = run;
        expect(run.inDoubt).toBe(false);
        expect(run.linesAtKill).toBe(1);
        // On a starved new worker the takeover can be fenced off and handed back more than once before it commits.
        const [recorded] = await waitFor(
          async () => {
            const runs = await cron.runs(jobId, 5);
            return runs.length > 0 ? runs : undefined;
          },
          180_000,
          'the run recorded',
        );
        expect(recorded).toMatchObject({ status: 'ok', output: 'Appended the line.' });
        expect(lines(file)).toEqual([`appended ${recorded!.occurrence_id}:1`]);
        expect(model.requests.filter((r) => lastToolResult(r) === undefined)).toHaveLength(1);
        // The second request: the one cut by the kill and the resumed one, the same request (a takeover fenced
        // off before its call was answered sends it once more).
        const seconds = model.requests.filter((r) => lastToolResult(r) !== undefined);
        expect(seconds.length).toBeGreaterThanOrEqual(2);
        for (const r of seconds) expect(r.messages).toEqual(seconds[0]!.messages);
        expect(await cron.runs(jobId, 5)).toHaveLength(1);
        return;
      }
    },
  );

  it('a tick handed back at drain after its compaction summary resumes on another worker: the summary is not asked for again, the turn runs on the same context', async ({
    cleanups,
    expect,
  }) => {
    const s = await startAgentStack(
      cleanups,
      { 'agent.context_window_tokens': 16_000, 'agent.cron_drain_timeout': 0.5 },
      { contextWindow: 16_000 },
    );
    const { hold } = holding(cleanups);
    const isSummary = (req: RecordedRequest) => req.tools.length === 0 && /summar/i.test(req.messages[0]?.content ?? '');
    let turnCalls = 0;
    s.model.respond((req) =>
      isSummary(req) ? 'Summary: the build was running at every check.' : ++turnCalls === 1 ? hold() : 'Still running.',
    );
    // A transcript over the compaction threshold (half the window).
    const transcript: TranscriptMessage[] = [];
    for (let i = 0; i < 12; i++) {
      const log = Array.from({ length: 60 }, (_, j) => `run-${i} [step ${j}] compiling pkg/service-${j % 37}/handler.go ... ok`).join('\n');
      transcript.push(
        { role: 'user', content: `check ${i}`, at: 1, source: 'tick', surface: 'cli' },
        { role: 'assistant', content: log, at: 2, source: 'tick', surface: 'cli' },
      );
    }
    await s.c.redis.rpush(s.c.keys.transcript('compacted'), ...transcript.map((m) => JSON.stringify(m)));
    await s.c.schedules.set(
      'compacted',
      'loop',
      { prompt: 'watch the build', intervalSeconds: 60, times: 1, until: null, notes: [] },
      { origin: { surface: 'cli' }, runner: { kind: 'agent' } },
    );
    // Summarised, then the turn's call in flight: the worker drains and hands the tick back.
    await waitFor(() => (turnCalls === 1 ? true : undefined), 90_000, 'the turn call');
    await s.worker.drain();
    const b = await startWorker(s.env);
    cleanups.push(() => b.drain());
    const [reply] = await waitForEvents(s.c, 'compacted', 'reply', 1, 90_000);
    expect(reply!.data.text).toBe('Still running.');
    expect(s.model.requests.filter(isSummary)).toHaveLength(1);
    const turns = s.model.requests.filter((r) => !isSummary(r));
    expect(turns).toHaveLength(2);
    expect(turns[1]!.messages).toEqual(turns[0]!.messages);
    expect(JSON.stringify(turns[1]!.messages)).toContain('the build was running at every check');
  });

  it('the step in doubt: after a SIGKILL during two command calls, the one not declared idempotent is reported to the model as unknown and not run; the one with on_doubt: rerun runs again with the same HERMES_STEP_ID', async ({
    cleanups,
    expect,
  }) => {
    const model = await startFakeOpenAI();
    cleanups.push(() => model.close());
    // Each command writes its step id, then waits (its first run, until the worker is killed); `check` ends at once when run again.
    const env = workerEnv(cleanups, model, (home) => ({
      commands: {
        deploy: {
          command: `echo "$HERMES_STEP_ID" >> ${join(home, 'deploy-runs')}; ${waitForFile(join(home, 'never'))}; echo deployed`,
          description: 'deploys',
        },
        check: {
          command: `echo "$HERMES_STEP_ID" >> ${join(home, 'check-runs')}; [ -f ${join(home, 'checked')} ] && { echo green; exit 0; }; touch ${join(home, 'checked')}; ${waitForFile(join(home, 'never'))}`,
          description: 'checks the build',
        },
      },
      on_doubt: { check: 'rerun' },
    }));
    const deployRuns = join(env.home, 'deploy-runs');
    const checkRuns = join(env.home, 'check-runs');
    model.respond((req) => {
      const result = lastToolResult(req);
      if (result === undefined) return { toolCalls: [{ name: lastUserText(req).includes('deploy') ? 'deploy' : 'check' }] };
      return `tool said: ${result.trim()}`;
    });
    const c = clients(env);
    cleanups.push(() => c.close());
    const a = await spawnWorker(cleanups, env);
    for (const [session, prompt] of [
      ['doubt-deploy', 'deploy the release'],
      ['doubt-check', 'check the build'],
    ] as const) {
      await c.schedules.set(
        session,
        'loop',
        { prompt, intervalSeconds: 30, times: 1, until: null, notes: [] },
        { origin: { surface: 'cli' }, runner: { kind: 'agent' } },
      );
    }
    // Both commands are running on the only worker: it dies now.
    await waitFor(() => (lines(deployRuns).length === 1 && lines(checkRuns).length === 1) || undefined, 90_000, 'both commands started');
    a.kill('SIGKILL');
    await new Promise((r) => a.once('exit', r));
    await spawnWorker(cleanups, env);

    const [deployReply] = await waitForEvents(c, 'doubt-deploy', 'reply', 1, 60_000);
    const [checkReply] = await waitForEvents(c, 'doubt-check', 'reply', 1, 60_000);
    // Not idempotent: not run again; the model was told the outcome is unknown, and why.
    expect(lines(deployRuns)).toHaveLength(1);
    expect(String(deployReply!.data.text)).toMatch(
      /^tool said: Error: the outcome of this call is unknown\..*deploy is not declared idempotent/,
    );
    const deployResults = await events(c, 'doubt-deploy', 'tool.result');
    expect(deployResults.at(-1)!.data).toMatchObject({ name: 'deploy', error: IN_DOUBT_ERROR });
    // `on_doubt: rerun`: run again, under the same step id.
    expect(checkReply!.data.text).toBe('tool said: green');
    const checkIds = lines(checkRuns);
    const checkOccurrence = String(checkReply!.data.occurrenceId);
    expect(checkIds).toEqual([`${checkOccurrence}:1`, `${checkOccurrence}:1`]);
    expect(lines(deployRuns)).toEqual([`${String(deployReply!.data.occurrenceId)}:1`]);
    // Neither turn's first request was sent again: each turn's first answer came from its journal.
    expect(model.requests.filter((r) => lastToolResult(r) === undefined)).toHaveLength(2);
  });
});

describe('tools.on_doubt', () => {
  it('a call in doubt runs again by default only for the read-only built-ins; the most specific name in tools.on_doubt decides', ({
    cleanups,
    expect,
  }) => {
    const home = mkdtempSync(join(tmpdir(), 'hermes-on-doubt-'));
    cleanups.push(() => rmSync(home, { recursive: true, force: true }));
    const toolbox = (onDoubt: Record<string, string>) =>
      new Toolbox(
        loadConfig({
          env: { HERMES_HOME: home },
          overrides: {
            'tools.files.roots': ['/srv'],
            'tools.http.allow': ['example.com'],
            'tools.commands': { ci: { command: 'true', description: 'ci' }, deploy: { command: 'true', description: 'deploy' } },
            'tools.on_doubt': onDoubt,
          },
        }),
        {} as ScheduleStatusSources,
      );
    const defaults = toolbox({});
    expect(['read_file', 'list_dir', 'http_get', 'schedule_status', 'ci', 'deploy', 'gone'].map((n) => defaults.onDoubt(n))).toEqual([
      'rerun',
      'rerun',
      'rerun',
      'rerun',
      'report',
      'report',
      'report',
    ]);
    const set = toolbox({ commands: 'rerun', deploy: 'report', read_file: 'report' });
    expect(['ci', 'deploy', 'read_file', 'list_dir'].map((n) => set.onDoubt(n))).toEqual(['rerun', 'report', 'report', 'rerun']);
  });
});

/**
 * A cron job's manual run on a `hermes worker` child whose turn runs a command, then asks the model a second
 * time; that call is held, and the worker is SIGKILLed while it is in flight, and a second worker started.
 * @returns what the test reads, whether the held second call carried the command's result in doubt
 *   (`inDoubt`: the first worker lost its job before the result was recorded) and the command's lines at the kill
 */
async function cronRunKilledInSecondCall(cleanups: CleanUp[]) {
  const model = await startFakeOpenAI();
  cleanups.push(() => model.close());
  const { hold } = holding(cleanups);
  const { env, file } = appendEnv(cleanups, model);
  let secondCalls = 0;
  model.respond((req) => {
    if (lastToolResult(req) === undefined) return { toolCalls: [{ name: 'append' }] };
    return ++secondCalls === 1 ? hold() : 'Appended the line.';
  });
  const c = clients(env);
  cleanups.push(() => c.close());
  const cron = cronServiceFor(env.config, c, createLogger({ level: 'silent' }));
  const a = await spawnWorker(cleanups, env);
  const job = await cron.add(
    { schedule: 'every 1h', prompt: 'append a line to the file', name: 'durable', paused: true },
    { origin: { surface: 'cli' }, trusted: true },
  );
  await cron.runNow(job.id, { origin: { surface: 'cli' }, trusted: true });
  const second = await waitFor(() => model.requests.find((r) => lastToolResult(r) !== undefined), 60_000, 'the second call');
  const inDoubt = lastToolResult(second)!.startsWith(inDoubtText('append'));
  const linesAtKill = lines(file).length;
  a.kill('SIGKILL');
  await new Promise((r) => a.once('exit', r));
  const b = await spawnWorker(cleanups, env);
  return { model, file, cron, jobId: job.id, b, inDoubt, linesAtKill };
}
