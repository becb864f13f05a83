/**
 * This product as an MCP server (the official `@modelcontextprotocol/sdk`), for other agents —
 * Claude Code, Cursor, Codex — to put durable schedules in (docs/MCP.md). Served over stdio by
 * `hermes mcp` (cli/commands/mcp.ts) and over Streamable HTTP at the gateway's `/mcp`
 * (`mcp-http.ts`, behind the API key). Surface `mcp`.
 *
 * Tools (each with a zod input schema; `mcp.tools` says which are offered): `create_schedule`,
 * `list_schedules`, `update_schedule`, `pause_schedule`, `resume_schedule`, `remove_schedule`,
 * `run_schedule` (loops, heartbeats and cron jobs, in the product's grammar: "weekdays at 9am" in a
 * zone), `next` (fire times of a job or a schedule text), `runs` (recent cron runs with their
 * output), `send` (a message to a session, as a user's) and `status`. The safeguards of the
 * schedule tools are in `schedule-actions.ts`. Resources: a session's transcript
 * (`hermes://sessions/{session}/transcript`) and a cron job's runs (`hermes://cron/{job}/runs`).
 *
 * A call's bad input comes back as a tool error (`isError`) in the services' words; nothing was
 * written. Any other failure is logged and answered with its message, never a stack.
 */
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { NOTIFY_MODES } from '../../scheduler/economy/notify.ts';
import { z } from 'zod';
import { MCP_TOOL_NAMES } from '../../scheduler/config/config.ts';
import { isHermesError } from '../../scheduler/errors/hermes-error.ts';
import { ScheduleInputError } from '../../scheduler/errors/schedule-input-error.ts';
import { cronJobView, cronRunView } from '../../scheduler/cron/cron-job.ts';
import { defaultTimeZone, formatInZone, isoUtc, nextOccurrences } from '../../scheduler/cron/cron-engine.ts';
import { MAX_PREVIEW_COUNT, parseInstant, previewSchedule } from '../../scheduler/cron/preview.ts';
import { aliveWorkerIds } from '../../scheduler/worker-liveness.ts';
import { assertSessionId } from '../../scheduler/session/session-id.ts';
import { clip } from '../../scheduler/text/clip.ts';
import { parseChatCommand } from '../../scheduler/session/chat-command.ts';
import type { SessionEvent } from '../../scheduler/session/session-store.ts';
import { sleep } from '../../scheduler/time/sleep.ts';
import { sendWebMessage } from '../web-input.ts';
import type { McpDeps } from './mcp-deps.ts';
import { MCP_SCHEDULE_KINDS, ScheduleActions, type ScheduleFields } from './schedule-actions.ts';

/** The session a call acts in when it names none: the one `hermes up` attaches to. */
export const MCP_DEFAULT_SESSION = 'main';

/** Longest wait `send` takes for its reply, seconds. */
const SEND_MAX_WAIT_SECONDS = 120;

/** How often a waiting `send` reads the session's stream, ms. */
const SEND_POLL_MS = 250;

/** Characters of a run's output a `runs` answer keeps (head and tail, `clip`). */
const RUN_OUTPUT_CHARS = 4000;

const session = z
  .string()
  .min(1)
  .max(200)
  .default(MCP_DEFAULT_SESSION)
  .describe('Session id: where a loop or heartbeat runs and where every change is told (default "main", the one `hermes up` chats in).');
const kind = z
  .enum(MCP_SCHEDULE_KINDS)
  .describe('loop: every interval (or self-paced); heartbeat: a periodic check-in; cron: a calendar schedule.');
const cronId = z.string().min(1).max(200).optional().describe("cron: the job's id or name (list_schedules shows them).");

/** The settable fields of a schedule, for create and update (the minimums as configured). */
const scheduleFields = (config: McpDeps['config']) => ({
  prompt: z.string().min(1).optional().describe('What each tick or run asks the agent to do.'),
  interval: z
    .string()
    .optional()
    .describe(
      `loop/heartbeat: "10m", "2h" (at least ${config.loops.min_interval_seconds}s for a loop, ${config.heartbeat.min_interval_seconds}s for a heartbeat); a loop without one paces itself.`,
    ),
  schedule: z
    .string()
    .optional()
    .describe(
      'cron: "weekdays at 9am", "daily at 7:30", "every 2h", "mondays and thursdays at 18:00", "0 9 * * 1-5", "in 30m", an ISO time.',
    ),
  tz: z.string().optional().describe('cron: IANA time zone the schedule is read in, e.g. "Europe/Berlin" (default: the configured zone).'),
  times: z.number().int().min(1).optional().describe('loop: finish after this many ticks; cron: complete after this many runs.'),
  until: z.string().optional().describe('loop: a condition that finishes it when met, e.g. "the deploy is live".'),
  name: z.string().min(1).max(80).optional().describe('A name to refer to it by.'),
  deliver: z
    .string()
    .optional()
    .describe(
      'Where replies also go: comma list of "local", "telegram:<chat>[:<thread>]", "slack:<channel>", "discord:<channel>", or an allowed webhook URL.',
    ),
  notify: z
    .string()
    .optional()
    .describe(
      `Which replies and notices reach the targets: ${NOTIFY_MODES.join('|')} (auto: all but [SILENT]; always: [SILENT] and cron skips too; done: only the last reply; never: no failure or pause notices).`,
    ),
  command: z
    .string()
    .optional()
    .describe('A shell command run instead of the agent (a command turn). Refused unless the operator allowed it (mcp.command_turns).'),
  after: z
    .array(z.string().min(1))
    .max(16)
    .optional()
    .describe(
      'cron: jobs (id or name) this one runs after, each "<job>" (its runs that end ok), "<job>:error" or "<job>:any"; a run after each such run, ' +
        "with that run's output offered to it. `schedule` may then be left out. On update the list replaces the old one ([] clears it).",
    ),
  after_all: z
    .boolean()
    .optional()
    .describe(
      'cron, with two `after` jobs or more: one run once every one of them has run in one window, with the latest output of each, ' +
        'instead of a run after each (false on update: after each again).',
    ),
});

/** Build an MCP server over `deps` (one per stdio connection, or per HTTP request). */
export function createMcpServer(deps: McpDeps, info: { version: string }): McpServer {
  const server = new McpServer(
    { name: 'hermes', version: info.version },
    {
      instructions:
        'hermes-scheduler keeps schedules running after every client has gone: loops, heartbeats and cron jobs whose turns run the hermes agent in a session, ' +
        'with replies on the session (and to Telegram, Slack, Discord or webhooks with `deliver`). Use create_schedule for anything recurring or at a later time, ' +
        'next to preview a cron schedule, runs to read what cron runs answered, send to talk to a session, status for an overview.',
    },
  );
  const actions = new ScheduleActions(deps);
  const offered = new Set<string>(deps.config.mcp.tools);
  const now = () => (deps.clock ?? Date.now)();
  const fields = scheduleFields(deps.config);

  /** Register `name` if `mcp.tools` offers it; its handler's result as JSON text, its input errors as tool errors. */
  const tool = <Shape extends z.ZodRawShape>(
    name: (typeof MCP_TOOL_NAMES)[number],
    description: string,
    shape: Shape,
    run: (args: z.infer<z.ZodObject<Shape>>, signal: AbortSignal) => Promise<unknown>,
    annotations: { readOnlyHint?: boolean; destructiveHint?: boolean } = {},
  ) => {
    if (!offered.has(name)) return;
    server.registerTool(name, { description, inputSchema: shape, annotations }, (async (
      args: z.infer<z.ZodObject<Shape>>,
      extra: { signal: AbortSignal },
    ) => {
      try {
        return answer(await run(args, extra.signal));
      } catch (err) {
        if (isHermesError(err)) return failure(err.message);
        deps.log.warn({ tool: name, err: (err as Error).message }, 'mcp: tool call failed');
        return failure(`The call failed: ${(err as Error).message}`);
      }
    }) as never);
  };

  tool(
    'create_schedule',
    'Create a durable schedule that keeps running after this client has gone: a loop (every `interval`, or self-paced), a heartbeat, ' +
      'or a cron job (`schedule` in words or cron syntax, read in `tz`). Each tick or run is a turn of the hermes agent with `prompt`; ' +
      'replies go to the session and to `deliver`. Returns the schedule with its next fire time.',
    { kind, session, ...fields },
    async (a) => await actions.create(a as ScheduleFields),
  );
  tool(
    'list_schedules',
    'List loops, heartbeats and cron jobs with their state and next fire time; `session` narrows to one session (cron jobs: those made for it).',
    {
      session: z.string().min(1).max(200).optional().describe('Only this session.'),
      kind: kind.optional(),
      all: z.boolean().optional().describe('Also finished loops and completed cron jobs.'),
    },
    async (a) => {
      const [records, jobs] = await Promise.all([
        a.kind === 'cron' ? [] : deps.loops.list(),
        a.kind === undefined || a.kind === 'cron' ? deps.cron.list({ all: a.all ?? false }) : [],
      ]);
      const loops = records.filter(
        (r) =>
          (a.session === undefined || r.sessionId === a.session) &&
          (a.kind === undefined || r.kind === a.kind) &&
          (a.all || r.status !== 'finished'),
      );
      return {
        loops: await Promise.all(loops.map((r) => actions.loopView(r))),
        cron_jobs: jobs.filter((j) => a.session === undefined || j.created_by?.session_id === a.session).map(cronJobView),
      };
    },
    { readOnlyHint: true },
  );
  tool(
    'update_schedule',
    'Change a schedule: the fields given replace its own, the rest stay. A loop or heartbeat is found by `session` and `kind`, a cron job by `id`.',
    { kind, session, id: cronId, ...fields },
    async (a) => await actions.update(a),
  );
  for (const [name, action, description] of [
    [
      'pause_schedule',
      'pause',
      'Pause a schedule (a loop or heartbeat by `session` and `kind`, a cron job by `id`); resume_schedule continues it.',
    ],
    ['resume_schedule', 'resume', 'Resume a paused schedule at the next point of its cadence (missed runs are not caught up).'],
    ['remove_schedule', 'remove', 'Stop and remove a schedule for good.'],
    ['run_schedule', 'run', 'Run a cron job once now, outside its schedule (its next run does not move); read its output with `runs`.'],
  ] as const) {
    tool(name, description, { kind, session, id: cronId }, async (a) => await actions.act(action, a), {
      destructiveHint: action === 'remove',
    });
  }
  tool(
    'next',
    'Preview the next fire times: of a cron job (`id`), or of a schedule text in a zone without creating anything (`schedule`, `tz`).',
    {
      id: cronId,
      schedule: fields.schedule,
      tz: fields.tz,
      count: z.number().int().min(1).max(MAX_PREVIEW_COUNT).default(5).describe('How many fire times.'),
      from: z.string().optional().describe('Start after this ISO-8601 instant (default: now).'),
    },
    async (a) => {
      if ((a.id === undefined) === (a.schedule === undefined))
        throw new ScheduleInputError('Give `id` (a cron job) or `schedule`, one of them.', { field: 'schedule' });
      let tz: string;
      let times: number[];
      let display: string;
      if (a.id !== undefined) {
        const job = await deps.cron.get(a.id);
        tz = job.tz;
        display = job.schedule.display;
        const from = a.from !== undefined ? parseInstant(a.from, tz) : now();
        times = job.state === 'scheduled' ? nextOccurrences(job.schedule, tz, from, a.count) : [];
      } else {
        tz = defaultTimeZone(a.tz, deps.config.timezone);
        const preview = previewSchedule(a.schedule!, {
          tz,
          fromMs: a.from !== undefined ? parseInstant(a.from, tz) : now(),
          count: a.count,
          minIntervalSeconds: deps.config.cron.min_interval_seconds,
          maxScheduleChars: deps.config.cron.max_schedule_chars,
        });
        times = preview.times;
        display = preview.schedule.display;
      }
      return { schedule: display, tz, next: times.map((t) => ({ utc: isoUtc(t), local: formatInZone(t, tz) })) };
    },
    { readOnlyHint: true },
  );
  tool(
    'runs',
    'Recent cron runs, newest first, with their status, times and output: of one job (`id`) or of all jobs.',
    { id: cronId, limit: z.number().int().min(1).max(100).default(10).describe('How many runs.') },
    async (a) =>
      (await deps.cron.runs(a.id, a.limit)).map((r) => {
        const view = cronRunView(r);
        return typeof view.output === 'string' ? { ...view, output: clip(view.output, RUN_OUTPUT_CHARS) } : view;
      }),
    { readOnlyHint: true },
  );
  tool(
    'send',
    'Send a message to a session, as a user would type it (not a slash command): the agent answers in that session (and on its platform route). ' +
      "Returns the message id, and with `wait_seconds` the agent's reply once it comes; the reply is also in the session's transcript (resource hermes://sessions/{session}/transcript).",
    {
      session,
      text: z.string().min(1).describe('The message.'),
      message_id: z.string().optional().describe('An id of your own (1–64 letters, digits, _ or -), so a retried send is taken once.'),
      wait_seconds: z
        .number()
        .int()
        .min(0)
        .max(SEND_MAX_WAIT_SECONDS)
        .default(0)
        .describe('Wait up to this long for the reply (0: return at once).'),
    },
    async (a, signal) => {
      // A slash command would set schedules past this server's rules (`mcp.tools`, the per-day limit): the schedule tools do that.
      if (parseChatCommand(a.text).kind === 'command') {
        throw new ScheduleInputError(
          '`send` takes messages, not slash commands: use the schedule tools (create_schedule, pause_schedule, …).',
          {
            field: 'text',
          },
        );
      }
      const m = await sendWebMessage(
        { redis: deps.redis, keys: deps.keys, queues: deps.queues, sessions: deps.sessions, maxChars: deps.config.agent.max_prompt_chars },
        { sessionId: a.session, text: a.text, clientId: a.message_id, surface: 'mcp' },
      );
      const queued = { message_id: m.id, session: m.sessionId, occurrence_id: m.occurrenceId, transcript: transcriptUri(m.sessionId) };
      if (a.wait_seconds === 0) return queued;
      const end = await turnEnd(deps, m.sessionId, m.eventId, m.occurrenceId, now() + a.wait_seconds * 1000, signal);
      return {
        ...queued,
        ...(end === undefined
          ? { status: 'waiting', reply: null }
          : { status: end.type === 'reply' ? 'replied' : 'failed', reply: typeof end.data.text === 'string' ? end.data.text : null }),
      };
    },
  );
  tool(
    'status',
    'An overview: live workers, and every active or paused loop, heartbeat and cron job with its next fire time and last result.',
    {},
    async () => {
      const [workers, records, jobs] = await Promise.all([
        aliveWorkerIds(deps.redis, deps.keys.workers),
        deps.loops.list(),
        deps.cron.list({ all: false }),
      ]);
      const live = records.filter((r) => r.status !== 'finished');
      return {
        workers: workers.length,
        loops: await Promise.all(live.map((r) => actions.loopView(r))),
        cron_jobs: jobs.map((j) => {
          const v = cronJobView(j);
          return {
            id: v.id,
            name: v.name,
            schedule: j.schedule.display,
            tz: v.tz,
            state: v.state,
            next_run_at: v.next_run_at,
            last_status: v.last_status,
            last_error: v.last_error,
            created_by: v.created_by,
          };
        }),
      };
    },
    { readOnlyHint: true },
  );

  server.registerResource(
    'session-transcript',
    new ResourceTemplate('hermes://sessions/{session}/transcript', { list: undefined }),
    { description: "A session's transcript: the messages its turns kept, oldest first (the newest 200).", mimeType: 'application/json' },
    async (uri, vars) => {
      const id = assertSessionId(String(vars.session));
      const messages = (await deps.sessions.transcript(id)).slice(-200);
      return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(messages) }] };
    },
  );
  server.registerResource(
    'cron-runs',
    new ResourceTemplate('hermes://cron/{job}/runs', { list: undefined }),
    { description: "A cron job's recent runs with their output, newest first (the last 20).", mimeType: 'application/json' },
    async (uri, vars) => {
      const runs = await deps.cron.runs(String(vars.job), 20);
      return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(runs.map(cronRunView)) }] };
    },
  );
  return server;
}

/**
 * The event that ends the turn of input `occurrenceId` (its `reply`, or its `error`), read from the
 * session's stream after `afterId` until `deadline` (epoch ms) or `signal`; `undefined` when none came.
 * Polled every `SEND_POLL_MS` on the commands connection, so a wait holds no connection of its own.
 */
async function turnEnd(
  deps: McpDeps,
  sessionId: string,
  afterId: string,
  occurrenceId: string,
  deadline: number,
  signal: AbortSignal,
): Promise<SessionEvent | undefined> {
  let cursor = afterId;
  for (;;) {
    const events = await deps.sessions.readEvents(sessionId, cursor, { count: 200 });
    for (const e of events) if ((e.type === 'reply' || e.type === 'error') && e.data.occurrenceId === occurrenceId) return e;
    cursor = events.at(-1)?.id ?? cursor;
    const left = deadline - (deps.clock ?? Date.now)();
    if (left <= 0 || signal.aborted) return undefined;
    await sleep(Math.min(SEND_POLL_MS, left), signal);
  }
}

/** A session's transcript resource. */
export function transcriptUri(sessionId: string): string {
  return `hermes://sessions/${encodeURIComponent(sessionId)}/transcript`;
}

function answer(value: unknown): CallToolResult {
  const text = typeof value === 'string' ? value : JSON.stringify(value, null, 2);
  return { content: [{ type: 'text', text }] };
}

function failure(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}
