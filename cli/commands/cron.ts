/**
 * `hermes cron …` (docs/DESIGN.md §7): a thin layer over `CronService` — parse flags,
 * call the service, print. Human output by default, `--json` for scripts.
 *
 * Exit codes: 0 ok; 1 `doctor` findings or an error (Redis unreachable, …);
 * 2 bad input (an unknown job, a bad schedule or flag), reported as one line
 * on stderr without a stack. `hermes cron next` needs no Redis.
 */
import { Command, CommanderError, Option } from 'commander';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { NOTIFY_WORDS } from '../../scheduler/economy/notify.ts';
import { defaultTimeZone, isoUtc, nextOccurrences } from '../../scheduler/cron/cron-engine.ts';
import {
  cronJobView,
  cronOccurrenceId,
  cronRunView,
  CRON_JOB_STATES,
  MISFIRE_POLICIES,
  OVERLAP_POLICIES,
  type CronJob,
  type CronJobState,
  type CronRun,
} from '../../scheduler/cron/cron-job.ts';
import { moreHint, readListPages, type PageFlags } from '../list-pages.ts';
import { noModelWarning } from '../../scheduler/agent-model.ts';
import { budgetSetWarning } from '../../scheduler/economy/token-budget.ts';
import { unconfiguredPlatformWarnings } from '../../scheduler/delivery/unconfigured-platform.ts';
import type { CronService } from '../../scheduler/cron/cron-service.ts';
import type { CronCaller, CronJobChanges, CronJobInput } from '../../scheduler/cron/cron-input.ts';
import { parseInstant, previewSchedule } from '../../scheduler/cron/preview.ts';
import { backfillView } from '../../scheduler/cron/backfill.ts';
import { wireKeys } from '../../scheduler/text/wire-case.ts';
import { EXIT_FAILURE, exitCodeOf, reportError } from '../run-command.ts';
import { ScheduleInputError } from '../../scheduler/errors/schedule-input-error.ts';
import { printErr, printOut, terminalJson } from '../terminal-text.ts';
import type { CliConnection, CliContext } from '../cli-context.ts';
import {
  describeCron,
  formatFindings,
  formatJob,
  formatJobDetails,
  formatJobList,
  formatPreview,
  formatRunLog,
  formatRuns,
  formatBackfill,
  formatStatus,
  when,
} from './cron-format.ts';

/** Where the commands write, and how they end. Tests pass their own. */
export interface CronCliIo {
  out(text: string): void;
  err: (text: string) => void;
  /** Record the exit code of a command that finished (default: `process.exitCode`). */
  setExitCode(code: number): void;
  /** End at once after a usage error (default: `process.exit`). */
  exit(code: number): never;
  now: () => number;
}

const processIo: CronCliIo = {
  out: printOut,
  err: printErr,
  setExitCode: (c) => {
    process.exitCode = c;
  },
  exit: (c) => process.exit(c),
  now: () => Date.now(),
};

const CLI_CALLER: CronCaller = { origin: { surface: 'cli' }, trusted: true };

/**
 * Add `hermes cron` and its subcommands to `program`.
 * @param io - output and exit hooks (default: the process's)
 */
export function registerCronCommands(program: Command, ctx: CliContext, io: CronCliIo = processIo): Command {
  // A platform target without its bot in this shell's configuration: its deliveries would wait unsent (a gateway
  // elsewhere may have the token, so it is a warning; scheduler/delivery/unconfigured-platform.ts).
  const warnUnsent = (job: CronJob) => {
    for (const line of unconfiguredPlatformWarnings(ctx.config, job.deliver, "this shell's configuration", job.origin.route))
      io.err(`Warning: ${line}`);
  };
  const cron = program
    .command('cron')
    .description('cron jobs: scheduled agent prompts and scripts that live outside every session')
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
    .exitOverride((err: CommanderError) => {
      io.exit(exitCodeOf(err));
    })
    .showHelpAfterError('(run `hermes cron --help` for usage)');

  /** An action: `precheck` (input checks that need no Redis) first, then the connection, then `fn`. */
  const run =
    <A extends unknown[]>(
      needsRedis: boolean,
      fn: (service: CronService | undefined, ...args: A) => Promise<void>,
      precheck?: (...args: A) => Promise<void>,
    ) =>
    async (...args: A) => {
      let conn: CliConnection | undefined;
      try {
        await precheck?.(...args);
        let service: CronService | undefined;
        if (needsRedis) {
          conn = await ctx.connect();
          service = await openService(ctx.config, conn, io);
        }
        await fn(service, ...args);
      } catch (err) {
        io.setExitCode(reportError(err, io.err));
      } finally {
        await conn?.close().catch(() => undefined);
      }
    };

  const print = (json: boolean | undefined, value: unknown, human: () => string[]) => {
    if (json) io.out(terminalJson(value));
    else for (const line of human()) io.out(line);
  };

  cron
    .command('list')
    .description("list jobs with next run (in each job's zone), last status and failure streak")
    .option('--all', 'every job, completed ones too (every page)')
    .option('--limit <n>', 'jobs in one page (default api_server.page_size, 50)')
    .option('--cursor <cursor>', 'the page after the one that printed it')
    .option('--state <state>', `only jobs in this state (${CRON_JOB_STATES.join(', ')})`)
    .option('--name <prefix>', 'only jobs whose name starts with it')
    .option('--json', "print JSON (the page's jobs; the next page's hint goes to stderr)")
    .action(
      run(true, async (service, opts: PageFlags & { state?: string; name?: string; json?: boolean }) => {
        const state = opts.state === undefined ? undefined : cronState(opts.state);
        const filter = { all: opts.all === true, ...(state ? { state } : {}), ...(opts.name ? { name: opts.name } : {}) };
        const page = await readListPages(ctx.config, opts, (request) => service!.page(request, filter));
        const jobs = page.items;
        print(opts.json, jobs.map(cronJobView), () => formatJobList(jobs, io.now()));
        // With --json stdout stays one JSON array, so the way to the next page goes to stderr.
        const say = (line: string) => (opts.json ? io.err(line) : io.out(line));
        for (const line of moreHint('hermes cron list', page, 'jobs')) say(line);
      }),
    );

  cron
    .command('show')
    .description('everything about one job: its settings, its next 5 runs and its last runs')
    .argument('<ref>', 'job id or name')
    .addOption(new Option('-n, --count <n>', 'how many next runs').default('5'))
    .addOption(new Option('--limit <n>', 'how many last runs').default('5'))
    .option('--json', 'print JSON')
    .action(
      run(true, async (service, ref: string, opts: { count: string; limit: string; json?: boolean }) => {
        const job = await service!.get(ref);
        const count = positiveInt(opts.count, '-n');
        const runs = await service!.runs(job.id, positiveInt(opts.limit, '--limit'));
        // The next runs start at the armed occurrence; later ones come from the same engine as real fire times.
        const next =
          job.state !== 'scheduled' || job.next_run_at === null
            ? []
            : [job.next_run_at, ...nextOccurrences(job.schedule, job.tz, job.next_run_at, count - 1)].slice(0, count);
        const description = job.schedule.kind === 'cron' ? (describeCron(job.schedule.expression) ?? null) : null;
        print(opts.json, { ...cronJobView(job), description, next_runs: next.map(isoUtc), runs: runs.map(cronRunView) }, () =>
          formatJobDetails(job, next, runs, io.now()),
        );
        // As on add, while it holds.
        warnUnsent(job);
      }),
    );

  withJobFlags(
    cron
      .command('add')
      .alias('create')
      .description('add a job: hermes cron add "weekdays at 9am" "summarise open pull requests"')
      .argument(
        '[schedule]',
        'e.g. 30m, every 2h, in 30m, tomorrow at 9am, monday at 9am (once), daily at 7am, weekdays at 9am, "0 9 * * 1-5", 2026-12-01T09:00 (may be left out with --after)',
      )
      .argument('[prompt...]', 'what the agent should do (or give --script)')
      .option('--paused', 'create it paused'),
  ).action(
    run(
      true,
      async (service, schedule: string | undefined, promptWords: string[], opts: JobFlags & { paused?: boolean }) => {
        const job = await service!.add(await addInput(ctx.config, io.now(), schedule, promptWords, opts), CLI_CALLER);
        print(opts.json, cronJobView(job), () => ['Added cron job:', ...formatJob(job, io.now())]);
        // An agent job without a model would fail every run: said now (on stderr, so --json stays JSON).
        const { SHELL_CONFIG } = await import('../../scheduler/services.ts');
        const warning = job.script === null ? noModelWarning(ctx.config, job.model, SHELL_CONFIG) : undefined;
        if (warning) io.err(warning);
        // So would a platform target without its bot.
        warnUnsent(job);
      },
      // Bad input is refused as such before any connection (field report F30).
      async (schedule, promptWords, opts) => {
        const [{ newCronJob }, { cronInputSettingsOf }] = await Promise.all([
          import('../../scheduler/cron/cron-commands.ts'),
          import('../../scheduler/services.ts'),
        ]);
        newCronJob(
          await addInput(ctx.config, io.now(), schedule, promptWords, opts),
          CLI_CALLER,
          cronInputSettingsOf(ctx.config),
          io.now(),
        );
      },
    ),
  );

  withJobFlags(
    cron
      .command('edit')
      .description('change a job; a new schedule or zone takes effect from now')
      .argument('<ref>', 'job id or name')
      .option('--schedule <schedule>', 'new schedule')
      .option('--prompt <text>', 'new prompt'),
  ).action(
    run(true, async (service, ref: string, opts: JobFlags & { schedule?: string; prompt?: string }) => {
      const changes: CronJobChanges = {
        schedule: opts.schedule,
        prompt: opts.prompt,
        name: opts.name,
        deliver: opts.deliver,
        tz: opts.tz,
        misfire: opts.misfire,
        catchup_window: opts.catchupWindow,
        overlap: opts.overlap,
        notify: opts.notify,
        script: opts.script,
        jitter: opts.jitter,
        repeat: opts.repeat === undefined ? undefined : opts.repeat === 'none' ? null : opts.repeat,
        // `none` clears these (the service reads it: `scheduler/cron/cron-economy.ts`).
        watch: opts.watch,
        max_tokens: opts.maxTokens,
        model: opts.model,
        // `--after` replaces the list; `--after none` clears it.
        after: opts.after === undefined ? undefined : opts.after.length === 1 && opts.after[0] === 'none' ? null : opts.after,
        after_all: opts.afterAll,
      };
      const job = await service!.edit(ref, changes, CLI_CALLER);
      print(opts.json, cronJobView(job), () => ['Updated cron job:', ...formatJob(job, io.now())]);
      // As on add, for targets this edit named.
      if (opts.deliver !== undefined) warnUnsent(job);
      // A new --max-tokens one run uses up (`scheduler/economy/token-budget.ts`): set, with a warning.
      const tooSmall = opts.maxTokens !== undefined ? budgetSetWarning(job.max_tokens, job.spend, 'run') : undefined;
      if (tooSmall) io.err(`Warning: ${tooSmall}`);
    }),
  );

  cron
    .command('pause')
    .description('pause a job; no run starts after this returns')
    .argument('<ref>', 'job id or name')
    .option('--json', 'print JSON')
    .action(
      run(true, async (service, ref: string, opts: { json?: boolean }) => {
        const { job, changed } = await service!.pause(ref);
        print(opts.json, { ...cronJobView(job), changed }, () => [
          changed ? `Paused ${job.id} (${job.name}).` : `${job.id} (${job.name}) is ${job.state}; nothing to pause.`,
        ]);
      }),
    );

  cron
    .command('resume')
    .description('resume a paused job at its next occurrence (missed runs are not caught up)')
    .argument('<ref>', 'job id or name')
    .option('--run-now', 'also run it once now')
    .option('--json', 'print JSON')
    .action(
      run(true, async (service, ref: string, opts: { runNow?: boolean; json?: boolean }) => {
        const { job, changed, manualJobId } = await service!.resume(ref, CLI_CALLER, { runNow: opts.runNow });
        print(opts.json, { ...cronJobView(job), changed, run_now: manualJobId !== undefined }, () => [
          changed
            ? `Resumed ${job.id} (${job.name}); next run ${when(job.next_run_at, job.tz, io.now())}.`
            : `${job.id} (${job.name}) is ${job.state}; nothing to resume.`,
          ...(manualJobId ? ['Running it once now.'] : []),
        ]);
      }),
    );

  cron
    .command('run')
    .description('run a job once now, outside its schedule (its next run does not move)')
    .argument('<ref>', 'job id or name')
    .option('--force', 'run a job paused by its token budget all the same')
    .option('--json', 'print JSON')
    .action(
      run(true, async (service, ref: string, opts: { force?: boolean; json?: boolean }) => {
        const { job, dueAt } = await service!.runNow(ref, CLI_CALLER, { force: opts.force });
        print(opts.json, { id: job.id, occurrence_id: cronOccurrenceId(job.id, dueAt, 'manual'), requested_at: isoUtc(dueAt) }, () => [
          `Queued a run of ${job.id} (${job.name}); \`hermes cron runs ${job.id}\` shows the result.`,
        ]);
      }),
    );

  cron
    .command('backfill')
    .description("run the occurrences the job's schedule had in a past window, oldest first (trigger backfill)")
    .argument('<ref>', 'job id or name')
    .requiredOption('--from <time>', "start of the window (ISO-8601; without an offset, in the job's zone)")
    .option('--to <time>', 'end of the window, included (default now; a later time is clipped to now)')
    .option('--force', 'backfill a job paused by its token budget all the same')
    .option('--json', 'print JSON')
    .action(
      run(true, async (service, ref: string, opts: { from: string; to?: string; force?: boolean; json?: boolean }) => {
        const { job, window, queued, recorded } = await service!.backfill(ref, CLI_CALLER, opts);
        print(opts.json, { id: job.id, ...backfillView(job.id, window, queued, recorded) }, () =>
          formatBackfill(job, window, queued, recorded),
        );
      }),
    );

  cron
    .command('remove')
    .aliases(['rm', 'delete'])
    .description('remove a job and its history; no run starts after this returns')
    .argument('<ref>', 'job id or name')
    .option('--json', 'print JSON')
    .action(
      run(true, async (service, ref: string, opts: { json?: boolean }) => {
        const job = await service!.remove(ref);
        print(opts.json, { id: job.id, removed: true }, () => [`Removed ${job.id} (${job.name}).`]);
      }),
    );

  cron
    .command('status')
    .description('fleet health: workers alive, next runs, lateness, failing jobs')
    .option('--json', 'print JSON')
    .action(
      run(true, async (service, opts: { json?: boolean }) => {
        const s = await service!.status();
        // `--json` is a wire format: the report's names in snake_case (`workers_alive`, `average_ms`; scheduler/text/wire-case.ts).
        print(opts.json, wireKeys({ ...s, upcoming: s.upcoming.map((u) => ({ ...u, next_run_at: isoUtc(u.next_run_at) })) }), () =>
          formatStatus(s, io.now()),
        );
      }),
    );

  cron
    .command('runs')
    .alias('history')
    .description('run records, newest first: of one job, or of all jobs')
    .argument('[ref]', 'job id or name')
    .addOption(new Option('--limit <n>', 'how many').default('20'))
    .option('--output', "print each run's whole output below its line (as `cron logs`)")
    .option('--json', 'print JSON')
    .action(
      run(true, async (service, ref: string | undefined, opts: { limit: string; output?: boolean; json?: boolean }) => {
        const limit = positiveInt(opts.limit, '--limit');
        const runs = await service!.runs(ref, limit);
        const jobs = new Map<string, CronJob>((await service!.list({ all: true })).map((j) => [j.id, j]));
        if (!opts.output) {
          print(opts.json, runs.map(cronRunView), () => formatRuns(runs, jobs));
          return;
        }
        const outputs = await outputsOf(service!, runs);
        print(
          opts.json,
          runs.map((r) => runWithOutput(r, outputs)),
          () =>
            runs.length === 0
              ? ['No runs recorded.']
              : runs.flatMap((r) => formatRunLog(r, jobs.get(r.job_id), outputs.get(r.occurrence_id), io.now())),
        );
      }),
    );

  cron
    .command('logs')
    .description("what a job's runs printed, oldest first, each output whole (what `local` delivery got)")
    .argument('<ref>', 'job id or name')
    .addOption(new Option('--limit <n>', 'how many of the last runs').default('10'))
    .option('-f, --follow', 'keep printing new runs as they are recorded (Ctrl+C ends)')
    .option('--json', 'print JSON (one array; with --follow one object per line)')
    .action(
      run(true, async (service, ref: string, opts: { limit: string; follow?: boolean; json?: boolean }) => {
        const job = await service!.get(ref);
        const shown = new Set<string>();
        const show = async (limit: number) => {
          const runs = (await service!.runs(job.id, limit)).filter((r) => !shown.has(r.occurrence_id)).reverse();
          const outputs = await service!.store.wholeOutputs(job.id, runs);
          for (const r of runs) shown.add(r.occurrence_id);
          return { runs, outputs };
        };
        const first = await show(positiveInt(opts.limit, '--limit'));
        if (opts.json && !opts.follow) {
          io.out(terminalJson(first.runs.map((r) => runWithOutput(r, first.outputs))));
          return;
        }
        const emit = ({ runs, outputs }: Awaited<ReturnType<typeof show>>) => {
          for (const r of runs) {
            if (opts.json) io.out(terminalJson(runWithOutput(r, outputs), 0));
            else for (const line of formatRunLog(r, job, outputs.get(r.occurrence_id), io.now())) io.out(line);
          }
        };
        if (first.runs.length === 0 && !opts.json)
          io.out(`No runs of ${job.id} (${job.name}) recorded yet.${opts.follow ? ' Waiting for one (Ctrl+C ends).' : ''}`);
        emit(first);
        if (!opts.follow) return;
        // Run records are written once per occurrence, so polling them finds each new run once.
        for (;;) {
          await new Promise((r) => setTimeout(r, LOGS_FOLLOW_POLL_MS));
          emit(await show(20));
        }
      }),
    );

  cron
    .command('next')
    .description('preview the next fire times of a schedule (no Redis needed), or of a job with --job')
    .argument('[schedule]', 'a schedule as for `add`')
    .option('--job <ref>', "preview this job's real fire times (its zone and jitter) instead of a schedule")
    .option('--tz <zone>', 'IANA time zone (default: config timezone, else the host zone)')
    .option('--from <iso>', 'start after this instant (default: now); without an offset it is read in the zone')
    .addOption(new Option('-n, --count <n>', 'how many').default('5'))
    .option('--json', 'print only a JSON array of ISO-8601 UTC times')
    .action(
      run(
        false,
        async (
          _service,
          schedule: string | undefined,
          opts: { job?: string; tz?: string; from?: string; count: string; json?: boolean },
        ) => {
          if (schedule === undefined && opts.job === undefined) {
            throw new ScheduleInputError("missing required argument 'schedule' (or give --job <ref>).", { field: 'schedule' });
          }
          if (schedule !== undefined && opts.job !== undefined) {
            throw new ScheduleInputError('Give a schedule or --job <ref>, not both.', { field: 'schedule' });
          }
          if (opts.job !== undefined) {
            // A job's fire times: the same engine, schedule (with its jitter) and zone that arm its real runs.
            const conn = await ctx.connect();
            try {
              const job = await (await openService(ctx.config, conn, io)).get(opts.job);
              const fromMs = opts.from !== undefined ? parseInstant(opts.from, job.tz) : io.now();
              const times = job.state === 'scheduled' ? nextOccurrences(job.schedule, job.tz, fromMs, positiveInt(opts.count, '-n')) : [];
              if (opts.json) io.out(terminalJson(times.map(isoUtc), 0));
              else for (const line of formatPreview({ schedule: job.schedule, tz: job.tz, fromMs, times }, io.now())) io.out(line);
            } finally {
              await conn.close().catch(() => undefined);
            }
            return;
          }
          const tz = defaultTimeZone(opts.tz, ctx.config.timezone);
          const fromMs = opts.from !== undefined ? parseInstant(opts.from, tz) : io.now();
          const preview = previewSchedule(schedule!, {
            tz,
            fromMs,
            count: positiveInt(opts.count, '-n'),
            minIntervalSeconds: ctx.config.cron.min_interval_seconds,
            maxScheduleChars: ctx.config.cron.max_schedule_chars,
          });
          if (opts.json) io.out(terminalJson(preview.times.map(isoUtc), 0));
          else for (const line of formatPreview(preview, io.now())) io.out(line);
        },
      ),
    );

  cron
    .command('doctor')
    .description('read-only checks of jobs, schedulers and workers; exit 1 on findings')
    .option('--json', 'print JSON')
    .action(
      run(true, async (service, opts: { json?: boolean }) => {
        const findings = await service!.doctor();
        print(opts.json, wireKeys(findings), () => formatFindings(findings));
        if (findings.length > 0) io.setExitCode(EXIT_FAILURE);
      }),
    );

  return cron;
}

interface JobFlags {
  name?: string;
  deliver?: string;
  repeat?: string;
  tz?: string;
  script?: string;
  misfire?: string;
  catchupWindow?: string;
  overlap?: string;
  notify?: string;
  jitter?: string;
  watch?: string;
  maxTokens?: string;
  model?: string;
  after?: string[];
  afterAll?: boolean;
  json?: boolean;
}

function withJobFlags(cmd: Command): Command {
  return cmd
    .option('--name <name>', 'name to refer to it by (default: the start of the prompt)')
    .option('--deliver <targets>', 'comma list: local, origin, telegram:<chat>[:<thread>], https://… (default local)')
    .option('--repeat <n>', 'run N times, then complete (edit: "none" removes the limit)')
    .option('--tz <zone>', 'IANA time zone of the schedule (default: config timezone, else the host zone)')
    .option('--script <command>', 'run this shell command instead of an agent turn (stdout is the output)')
    .addOption(
      new Option(
        '--misfire <policy>',
        'beyond the grace window: run one catch-up (once), skip, or every missed run within --catchup-window (all)',
      ).choices(MISFIRE_POLICIES),
    )
    .option(
      '--catchup-window <duration>',
      'with --misfire all: how far back missed runs are still run after an outage (e.g. 6h, 2d; default cron.catchup_window_seconds; edit: "none" for the default)',
    )
    .addOption(new Option('--overlap <policy>', 'when still running at the next occurrence').choices(OVERLAP_POLICIES))
    .addOption(
      new Option(
        '--notify <mode>',
        "replies and notices to the targets: auto (default), always (quiet replies and skips too), done (only the last run's reply), never (no notices); failure = auto",
      ).choices(NOTIFY_WORDS),
    )
    .option(
      '--jitter <duration>',
      'shift every fire by a fixed per-job offset below this (e.g. 5m; 0 for none); must be less than the shortest gap between fires',
    )
    .option(
      '--watch <check>',
      'run this declared check first and skip the run while its output is unchanged: a command tool, read_file:<path> or http_get:<url> (edit: "none" removes it)',
    )
    .option(
      '--max-tokens <n>',
      'pause the job once its runs have spent this many tokens (in + out); resume gives a fresh allowance (edit: "none" removes it)',
    )
    .option('--model <name>', 'a model declared under agent.models (default: agent.model; edit: "none" for the default)')
    .option(
      '--after <job>',
      'run after each run of this job that ends ok (<job>:error, <job>:any for the others); repeat for several jobs (edit: replaces the list, "none" clears it)',
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .option('--after-all', 'with two or more --after jobs: run once every one of them has run, in one window, instead of after each')
    .option('--no-after-all', 'edit: run after each --after job again')
    .option('--json', 'print JSON');
}

/** How often `cron logs --follow` looks for new runs (ms). */
const LOGS_FOLLOW_POLL_MS = 1000;

/** The whole outputs of runs of any jobs (`CronStore.wholeOutputs`, one call per job). */
async function outputsOf(service: CronService, runs: CronRun[]): Promise<Map<string, { text: string; whole: boolean }>> {
  const out = new Map<string, { text: string; whole: boolean }>();
  for (const jobId of new Set(runs.map((r) => r.job_id))) {
    for (const [k, v] of await service.store.wholeOutputs(
      jobId,
      runs.filter((r) => r.job_id === jobId),
    ))
      out.set(k, v);
  }
  return out;
}

/** A run's JSON view with its whole output (`output_whole` false: the record's capped copy). */
function runWithOutput(run: CronRun, outputs: Map<string, { text: string; whole: boolean }>): Record<string, unknown> {
  const o = outputs.get(run.occurrence_id);
  return { ...cronRunView(run), output: run.status === 'ok' ? (o?.text ?? run.output) : run.output, output_whole: o?.whole ?? true };
}

/**
 * `cron add`'s arguments as the service's input. With `--after` the schedule may be left out: the first argument
 * is the schedule only when it reads as one, else it starts the prompt.
 * @throws ScheduleInputError when there is neither a schedule nor `--after`
 */
async function addInput(
  config: HermesConfig,
  now: number,
  first: string | undefined,
  promptWords: string[],
  opts: JobFlags & { paused?: boolean },
): Promise<CronJobInput> {
  let schedule = first;
  let words = promptWords;
  if (opts.after?.length && first !== undefined && !(await readsAsSchedule(config, now, first, opts.tz))) {
    schedule = undefined;
    words = [first, ...promptWords];
  }
  if (first === undefined && !opts.after?.length) {
    throw new ScheduleInputError("missing required argument 'schedule' (or give --after <job>).", { field: 'schedule' });
  }
  return {
    schedule,
    prompt: words.join(' '),
    after: opts.after,
    after_all: opts.afterAll,
    name: opts.name,
    deliver: opts.deliver,
    repeat: opts.repeat,
    tz: opts.tz,
    script: opts.script,
    paused: opts.paused,
    misfire: opts.misfire,
    catchup_window: opts.catchupWindow,
    overlap: opts.overlap,
    notify: opts.notify,
    jitter: opts.jitter,
    watch: opts.watch,
    max_tokens: opts.maxTokens,
    model: opts.model,
  };
}

/** Whether `text` parses as a schedule in the zone a new job would get. */
async function readsAsSchedule(config: HermesConfig, now: number, text: string, tz: string | undefined): Promise<boolean> {
  const [{ parseCronSchedule }, { cronInputSettingsOf }] = await Promise.all([
    import('../../scheduler/cron/cron-input.ts'),
    import('../../scheduler/services.ts'),
  ]);
  try {
    parseCronSchedule(text, defaultTimeZone(tz, config.timezone), now, cronInputSettingsOf(config));
    return true;
  } catch {
    return false;
  }
}

/** The cron service on `conn`; the stores and the logger load with it, so `cron next` never loads them. */
async function openService(config: HermesConfig, conn: CliConnection, io: CronCliIo): Promise<CronService> {
  const [{ cronServiceFor }, { createLogger }] = await Promise.all([
    import('../../scheduler/services.ts'),
    import('../../scheduler/logger.ts'),
  ]);
  const level = config.log_level === 'info' ? 'warn' : config.log_level;
  return cronServiceFor(config, conn, createLogger({ level, name: 'cli' }), io.now);
}

function cronState(value: string): CronJobState {
  if (!(CRON_JOB_STATES as readonly string[]).includes(value))
    throw new ScheduleInputError(`\`state\` must be one of ${CRON_JOB_STATES.join(', ')}, got "${value}".`, { field: 'state' });
  return value as CronJobState;
}

function positiveInt(value: string, flag: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1)
    throw new ScheduleInputError(`${flag} must be a positive whole number, got "${value}".`, { field: flag });
  return Number(value);
}
