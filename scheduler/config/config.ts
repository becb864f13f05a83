/**
 * Configuration: parsed and validated once, then passed down as a typed object.
 * No other module reads `process.env` for settings.
 *
 * Sources, later wins:
 *   1. defaults below (the one place defaults are resolved; docs/DESIGN.md §4–§10),
 *   2. `$HERMES_HOME/config.yaml` (HERMES_HOME defaults to `~/.hermes`),
 *   3. environment: `HERMES_<SECTION>_<KEY>` for every key (e.g. `HERMES_LOOPS_MAX_TICKS=0`;
 *      an empty value counts as unset),
 *      plus the named variables of docs/DESIGN.md §10 (`REDIS_URL`, `API_SERVER_KEY`, `OPENAI_BASE_URL`, …).
 *
 * @throws ConfigError naming the bad key when a value does not validate.
 */
import { validate as isTimerExpression } from 'node-cron';
import { readFileSync, existsSync, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import ipaddr from 'ipaddr.js';
import { parse as parseYaml } from 'yaml';
import * as z from 'zod/mini';
import en from 'zod/v4/locales/en.js';
import { ConfigError } from '../errors/config-error.ts';
import { parseWebhookAllow } from '../delivery/webhook-policy.ts';
import { isTimeZone } from '../cron/cron-engine.ts';
import { withoutPrototype } from '../names/name-table.ts';
import { assertTrustedHome } from './home-check.ts';
import { ORIGIN_SURFACES } from '../session/origin.ts';
import { LOOP_KINDS } from '../tick/tick-kind.ts';

// The schema is written with zod's functional API (`zod/mini`), which the bundler can tree-shake: with the
// classic API every `hermes` call loaded all of zod (docs/BENCHMARKS.md, "CLI start-up"). It comes without
// messages, so it is given zod's English ones, the messages classic zod gives (other modules' schemas use those).
z.config(en());

/** A comma list from the environment (`a, b,,c` → `['a', 'b', 'c']`); any other value (a YAML list) is left as it is. */
function splitCommaList(v: unknown): unknown {
  return typeof v === 'string'
    ? v
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0)
    : v;
}
/** `list` (an array schema), also given as a comma list in the environment. */
const commaList = <T extends z.ZodMiniType>(list: T) => z.pipe(z.transform(splitCommaList), list);

// The value schemas the helpers below share: one instance each, only the default is per setting (a
// schema is immutable, so sharing changes nothing a parse does; building hundreds of copies cost every
// call's start-up, docs/BENCHMARKS.md "CLI start-up").
const SECONDS = z.coerce.number().check(z.gte(0));
const AT_LEAST_ONE_SECOND = z.coerce.number().check(z.gte(1));
const POSITIVE_INT = z.coerce.number().check(z.int()).check(z.positive());
const FLAG = z.pipe(
  z.transform((v) => (typeof v === 'string' ? !['0', 'false', 'no', 'off'].includes(v.toLowerCase()) : v)),
  z.boolean(),
);

const seconds = (def: number) => z._default(SECONDS, def);
/** A list of seconds, from YAML or a comma list in the environment (`30,60,120`). */
const secondsList = (def: number[]) => z._default(commaList(z.array(z.coerce.number().check(z.positive())).check(z.minLength(1))), def);
const atLeastOneSecond = (def: number) => z._default(AT_LEAST_ONE_SECOND, def);
const positiveInt = (def: number) => z._default(POSITIVE_INT, def);
/** A boolean, also from `0/1/true/false/yes/no/on/off` in the environment. */
const flag = (def: boolean) => z._default(FLAG, def);
/** A list of strings, from YAML or a comma list in the environment. */
const stringList = () => z._default(commaList(z.array(z.string().check(z.minLength(1)))), []);
/** Platform user ids (a platform's allow-list: Telegram, Slack, Discord), from YAML (numbers taken as text) or a comma list in the environment; empty ones dropped. */
const userIdList = () =>
  z._default(
    z.pipe(
      commaList(
        z.array(
          z.pipe(
            z.union([
              z.string(),
              // A YAML number past 2^53 (a Discord or Telegram id written unquoted) has already lost digits.
              z
                .number()
                .check(
                  z.refine(Number.isSafeInteger, { message: 'too large to be read exactly as a number: quote the id in config.yaml' }),
                ),
            ]),
            z.transform((id) => String(id).trim()),
          ),
        ),
      ),
      z.transform((ids) => ids.filter((id) => id.length > 0)),
    ),
    [],
  );
/** Environment variable names, from YAML or a comma list in the environment (`AWS_PROFILE,GH_TOKEN`). */
const envNameList = z._default(
  commaList(z.array(z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be environment variable names')))),
  [],
);
/**
 * A record keyed by names (`agent.models`, `tools.commands`, `tools.allow_from`, `mcp_servers`, `commands`,
 * environment maps), empty by default, parsed into an object with no prototype: a lookup by a name a user
 * gives (`--watch constructor`) finds only what the operator declared (the rule: ../names/name-table.ts).
 */
function nameRecord<V extends z.ZodMiniType>(value: V, key: z.ZodMiniString = z.string()) {
  return z.prefault(
    z.pipe(
      z.record(key, value),
      z.transform((r) => withoutPrototype(r as Record<string, z.output<V>>)),
    ),
    {},
  );
}

/**
 * Connection limits of the HTTP servers (the gateway's and a worker's metrics server), the
 * defaults of `api_server.max_connections`, `headers_timeout_ms`, `request_timeout_ms` and
 * `keep_alive_timeout_ms`.
 */
export const HTTP_LIMIT_DEFAULTS = {
  max_connections: 1024,
  headers_timeout_ms: 10_000,
  request_timeout_ms: 30_000,
  keep_alive_timeout_ms: 5_000,
} as const;

/** A command a command turn may run; only config or the CLI may define one (docs/DESIGN.md §3). */
const commandSchema = () =>
  z.strictObject({
    /** Shell command line; its stdout is the reply. */
    command: z.string().check(z.minLength(1)),
    /** Kill the command after this many seconds. @defaultValue 60 */
    timeout_seconds: seconds(60),
    /** Fixed environment values for this command (commands never inherit the worker's environment). */
    env: nameRecord(z.string(), z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name'))),
    /** Names of the worker's environment variables this command also gets. @defaultValue [] */
    pass_env: envNameList,
  });

/**
 * Surfaces a turn can come from; `tools.allow_from` names them: the surfaces of input
 * (`ORIGIN_SURFACES`), a `/v1` request and a cron run.
 */
export const TOOL_SURFACES = [...ORIGIN_SURFACES, 'v1', 'cron'] as const;

/** The tools of this product's MCP server (`mcp.tools`; gateway/mcp/). */
export const MCP_TOOL_NAMES = [
  'create_schedule',
  'list_schedules',
  'update_schedule',
  'pause_schedule',
  'resume_schedule',
  'remove_schedule',
  'run_schedule',
  'next',
  'runs',
  'send',
  'status',
] as const;

/**
 * What `tools.schedules.allow_from` names: the surfaces of `tools.allow_from` but `v1` (a `/v1`
 * request belongs to no session, so nothing it schedules could be its own), and the turns that
 * run unattended by their kind: `loop` and `heartbeat` ticks, `goal` continuations, `cron` runs.
 */
export const SCHEDULE_TOOL_SURFACES = [...ORIGIN_SURFACES, 'loop', 'heartbeat', 'goal', 'cron'] as const;

/**
 * What a signed webhook (`hooks.<name>`, `POST /hooks/<name>`; docs/GATEWAY.md "Webhooks") does:
 * `turn` starts a turn in its session, `run_job` runs its cron job now, `wake_loop` runs the next
 * tick of its session's loop (or heartbeat) now, so a `--until` condition is judged at once.
 */
export const HOOK_ACTIONS = ['turn', 'run_job', 'wake_loop'] as const;

/**
 * How a webhook's sender signs it: `github` is GitHub's `X-Hub-Signature-256` (HMAC-SHA256 of the
 * body, no timestamp); `hermes` is `X-Hermes-Signature: t=<unix seconds>,v1=<HMAC-SHA256 of "t.body">`.
 */
export const HOOK_SIGNATURES = ['github', 'hermes'] as const;

/**
 * The templates of a hook that sets none: its name, the event and the payload (clipped); `noEvent` when
 * the sender named no event (no `X-GitHub-Event` or `X-Hermes-Event`), so no empty name is put in.
 */
export const HOOK_DEFAULT_TEMPLATES = {
  event: 'Webhook {{$hook}} received event "{{$event}}": {{$payload}}',
  noEvent: 'Webhook {{$hook}} received a delivery: {{$payload}}',
} as const;

/** The template a delivery of `hook` with `event` (empty: none named) renders: the hook's own, else a default. */
export function hookTemplate(hook: { template?: string | undefined }, event: string): string {
  return hook.template ?? (event === '' ? HOOK_DEFAULT_TEMPLATES.noEvent : HOOK_DEFAULT_TEMPLATES.event);
}

/** A session id as `scheduler/session/session-id.ts` checks it. */
const HOOK_SESSION = /^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}$/;

/** What `loadConfig` adds to a hook whose `secret_env` or `secret_file` gave no secret. */
interface HookSecretProblem {
  /** Why, naming the setting: only the gateway, which checks signatures, refuses to start on it. */
  secret_problem?: string;
}

/**
 * A signed webhook the operator declares (`hooks.<name>`): who may call `POST /hooks/<name>`, how
 * the request is signed, and what it starts. Exactly one of `session` and `cron_job`, exactly one of
 * `secret`, `secret_env` and `secret_file`; `loadConfig` resolves the secret into `secret`.
 */
const hookSchema = () =>
  z.pipe(
    z
      .pipe(
        z
          .strictObject({
            /**
             * The session whose turn the hook starts (`action: turn`; its reply goes where the session's replies go),
             * or whose loop it wakes (`action: wake_loop`).
             */
            session: z.optional(z.string().check(z.regex(HOOK_SESSION, 'must be a session id (letters, digits, _ . @ : -)'))),
            /** The cron job (id or name) the hook runs now (`action: run_job`). */
            cron_job: z.optional(z.string().check(z.minLength(1))),
            /** `turn`, `wake_loop` (with `session`) or `run_job` (with `cron_job`). @defaultValue `turn` with `session`, `run_job` with `cron_job` */
            action: z.optional(z.enum(HOOK_ACTIONS)),
            /** Which of the session's schedules `wake_loop` wakes: `loop` or `heartbeat`. @defaultValue loop */
            schedule: z.optional(z.enum(LOOP_KINDS)),
            /** The shared secret of the signatures (at least 16 characters); never logged. Prefer `secret_env` or `secret_file`. */
            secret: z.optional(z.string().check(z.minLength(16, 'must be at least 16 characters'))),
            /** The environment variable holding the secret. */
            secret_env: z.optional(z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name'))),
            /** An absolute path of a file holding the secret (surrounding blanks ignored). */
            secret_file: z.optional(z.string().check(z.refine(isAbsolute, { message: 'must be an absolute path' }))),
            /** `github` (`X-Hub-Signature-256`) or `hermes` (`X-Hermes-Signature` with a timestamp). @defaultValue hermes */
            signature: z._default(z.enum(HOOK_SIGNATURES), 'hermes'),
            /**
             * The turn's input: `{{path.to.field}}` is replaced by that field of the JSON payload (`{{$hook}}`,
             * `{{$event}}`, `{{$delivery}}` and `{{$payload}}` by the hook's name, the event header, the delivery
             * id and the whole payload); each value is clipped to `max_value_chars`, the input to
             * `max_input_chars`. Nothing else is evaluated. @defaultValue `Webhook {{$hook}} received event "{{$event}}": {{$payload}}`,
             * or `Webhook {{$hook}} received a delivery: {{$payload}}` for a delivery that names no event (`hookTemplate`)
             */
            template: z.optional(z.string().check(z.minLength(1))),
            /** Only these events (`X-GitHub-Event`, `X-Hermes-Event`) act; others are answered 202 `ignored`. @defaultValue every event */
            events: stringList(),
            /** Only payloads whose fields equal these values act (`{"action": "completed"}`); others are answered 202 `ignored`. @defaultValue {} */
            match: nameRecord(z.pipe(z.union([z.string(), z.number(), z.boolean()]), z.transform(String))),
            /** Sender addresses or CIDR ranges (`140.82.112.0/20`) allowed to call; others get 403 before the body is read. @defaultValue any */
            allow_from: stringList().check(
              z.refine((l) => l.every((a) => ipaddr.isValid(a) || ipaddr.isValidCIDR(a)), {
                message: 'must be IP addresses or CIDR ranges (e.g. 140.82.112.0/20)',
              }),
            ),
            /** Largest body accepted, bytes; a larger one is 413 and not read further. @defaultValue 1048576 (1 MiB) */
            max_body_bytes: positiveInt(1_048_576),
            /** Characters of one value the template puts in. @defaultValue 1000 */
            max_value_chars: positiveInt(1000),
            /** Characters of the rendered input (and at most `agent.max_prompt_chars`). @defaultValue 4000 */
            max_input_chars: positiveInt(4000),
            /**
             * Seconds a delivery id is remembered: the same id again within it is refused as a replay. At least
             * 600 (twice the 5-minute tolerance of `hermes` timestamps). GitHub's signature has no timestamp, so
             * this is all that stops a captured GitHub delivery. @defaultValue 604800 (7 days)
             */
            replay_window_seconds: z._default(z.coerce.number().check(z.int()).check(z.gte(600)), 604_800),
          })
          .check(
            z.refine((h) => [h.secret, h.secret_env, h.secret_file].filter((s) => s !== undefined).length === 1, {
              message: 'set exactly one of secret, secret_env and secret_file',
              path: ['secret'],
            }),
          )
          .check(
            z.refine((h) => (h.session === undefined) !== (h.cron_job === undefined), {
              message: 'set exactly one of session and cron_job',
              path: ['session'],
            }),
          ),
        z.transform(({ action, schedule, ...h }) => ({
          ...h,
          action: action ?? (h.session !== undefined ? 'turn' : 'run_job'),
          ...(schedule !== undefined ? { schedule } : {}),
        })),
      )
      .check(
        z.refine((h) => (h.action !== 'run_job') === (h.session !== undefined), {
          message: 'actions turn and wake_loop need a session; action run_job needs a cron_job',
          path: ['action'],
        }),
      )
      .check(
        z.refine((h) => h.action === 'wake_loop' || h.schedule === undefined, {
          message: 'schedule is read only by action wake_loop',
          path: ['schedule'],
        }),
      ),
    z.transform(
      (h) => (h.action === 'wake_loop' ? { ...h, schedule: h.schedule ?? ('loop' as const) } : h) as typeof h & HookSecretProblem,
    ),
  );

/** What a resumed turn may do with a tool call in doubt (`tools.on_doubt`). */
export const ON_DOUBT_POLICIES = ['rerun', 'report'] as const;

/**
 * A command the agent may call as a tool (`tools.commands.<name>`). The model's
 * arguments never become shell text: they reach the command as environment
 * variables `HERMES_ARG_<NAME>` (and, for an argv `command`, as whole argv
 * elements through `{name}` placeholders).
 */
const toolCommandSchema = () =>
  z.strictObject({
    /** A shell line written by the operator (run with `/bin/sh -c`), or an argv list run without a shell. */
    command: z.union([z.string().check(z.minLength(1)), z.array(z.string()).check(z.minLength(1))]),
    /** What the tool does, for the model. */
    description: z.string().check(z.minLength(1)),
    /** JSON Schema (type object) of the tool's parameters. @defaultValue no parameters */
    parameters: z.optional(z.record(z.string(), z.unknown())),
    /** Kill the command after this many seconds. @defaultValue `tools.timeout_seconds` */
    timeout_seconds: z.optional(z.coerce.number().check(z.positive())),
    /** Fixed variables of the command's environment. @defaultValue {} */
    env: nameRecord(z.string()),
    /** Names of the worker's variables passed through to this command (e.g. `GH_TOKEN`). @defaultValue [] */
    pass_env: envNameList,
  });

/** An MCP server: a child process speaking stdio, or a Streamable HTTP endpoint. */
const mcpServerSchema = () =>
  z.union([
    z.strictObject({
      command: z.string().check(z.minLength(1)),
      args: z._default(z.array(z.string()), []),
      /** Extra environment of the server process (it does not inherit the worker's secrets). */
      env: nameRecord(z.string()),
      cwd: z.optional(z.string()),
    }),
    z.strictObject({
      url: z.string().check(z.url()),
      headers: nameRecord(z.string()),
    }),
  ]);

/**
 * `agent.compaction`: when a session's context is compacted before a turn, and down to what
 * (docs/CONTEXT.md, "Compaction"; the policy: `worker/context/compaction.ts`).
 */
const compactionSchema = () =>
  z
    .strictObject({
      /**
       * Share of the turn model's window at or past which a session's context is compacted before
       * the turn. @defaultValue 0.5
       */
      threshold: z._default(z.coerce.number().check(z.gt(0)).check(z.lte(0.85)), 0.5),
      /**
       * Share of the window a compaction brings the context down to, below `threshold`: the room
       * left between them is what later turns append before the next compaction, so a summary is
       * written every several turns and the request's prefix stays the same in between. @defaultValue 0.25
       */
      target: z._default(z.coerce.number().check(z.gt(0)).check(z.lte(0.85)), 0.25),
      /** Messages at the end of a transcript kept verbatim by compaction (at most; see `target`). @defaultValue 8 */
      keep_recent_messages: z._default(z.coerce.number().check(z.int()).check(z.gte(2)), 8),
      /** Model (a name of `agent.models`, or a model id of the primary endpoint) that writes summaries; unset = the turn's model. */
      model: z.optional(z.string().check(z.minLength(1))),
    })
    .check(z.refine((c) => c.target < c.threshold, { message: 'target must be below threshold', path: ['target'] }));

/**
 * The top-level settings that are not sections: parsed on every load (two small schemas), so an unset
 * one is left out of the configuration exactly as zod leaves out an unset optional key.
 */
const TOP_LEVEL = {
  /** IANA zone for cron jobs without `--tz`; default the host zone. */
  timezone: z.optional(z.string().check(z.refine(isTimeZone, { message: 'unknown time zone (use an IANA name like Europe/Berlin)' }))),
  log_level: z._default(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']), 'info'),
};

/**
 * The configuration's sections, each a function that builds its schema: a section is built on first
 * use (`sectionSchema`), so a call pays only for the sections it is given or reads. Building all of them
 * (about 300 settings) was a sixth of every `hermes` call's start-up (docs/BENCHMARKS.md, "CLI start-up").
 */
const SECTIONS = {
  redis: () =>
    z.prefault(
      z
        .strictObject({
          /** `redis://…` of an operator-run Redis; when unset the embedded server is used. */
          url: z.optional(z.string()),
          /** Hash-tagged key prefix: every key lives in one cluster slot. */
          prefix: z._default(z.string().check(z.regex(/^\{[^{}]+\}$/, 'must be a hash tag like {hermes}')), '{hermes}'),
          /** Start a private `redis-server` from PATH when no URL is set. @defaultValue true */
          embedded: flag(true),
          /**
           * Restarts of a crashed embedded Redis `hermes up` makes within 5 minutes before it gives
           * up and stops the stack; 0 = never restart. @defaultValue 5
           */
          embedded_max_restarts: z._default(z.coerce.number().check(z.int()).check(z.gte(0)), 5),
          /** Redis Cluster seed nodes, `host:port` (REDIS_CLUSTER_NODES, a comma list); set → the cluster is used. */
          cluster_nodes: stringList(),
          /** Sentinels, `host:port` (REDIS_SENTINELS, a comma list); set → the primary they name is used. */
          sentinels: stringList(),
          /** Primary name the sentinels know (REDIS_SENTINEL_NAME); required with `sentinels`. */
          sentinel_name: z.optional(z.string().check(z.minLength(1))),
          /** Password of the cluster nodes or the Sentinel-managed primary (REDIS_PASSWORD); never logged. */
          password: z.optional(z.string().check(z.minLength(1))),
          /** ACL user name for `password` (REDIS_USERNAME). */
          username: z.optional(z.string().check(z.minLength(1))),
          /** TLS to cluster nodes or the Sentinel-managed primary (a single Redis uses `rediss://`). @defaultValue false */
          tls: flag(false),
          /**
           * Shards of the key space: hash tags `{hermes:0}` … `{hermes:N-1}` (one shard keeps
           * the plain `{hermes}`). A session or cron job lives wholly on one shard. Changing
           * it on a store that has data is refused. @defaultValue 1
           */
          shards: z._default(z.coerce.number().check(z.int()).check(z.gte(1)).check(z.lte(1024)), 1),
          /**
           * Replicas that must acknowledge each commit before it is delivered (Redis `WAIT`; 0 = none):
           * narrows the window a failover can lose a commit in (`scheduler/store/redis/replica-ack.ts`). @defaultValue 0
           */
          wait_replicas: z._default(z.coerce.number().check(z.int()).check(z.gte(0)), 0),
          /** Longest wait for them per commit, ms; on a timeout the commit stands and a warning says so. @defaultValue 1000 */
          wait_timeout_ms: z._default(z.coerce.number().check(z.int()).check(z.gte(1)), 1000),
        })
        .check(
          z.refine((r) => [r.url, r.cluster_nodes.length > 0, r.sentinels.length > 0].filter(Boolean).length <= 1, {
            message: 'set only one of url (REDIS_URL), cluster_nodes (REDIS_CLUSTER_NODES) and sentinels (REDIS_SENTINELS)',
            path: ['cluster_nodes'],
          }),
        )
        .check(
          z.refine((r) => r.sentinels.length === 0 || r.sentinel_name !== undefined, {
            message: 'sentinel_name (REDIS_SENTINEL_NAME) is required with sentinels',
            path: ['sentinel_name'],
          }),
        ),
      {},
    ),
  loops: () =>
    z.prefault(
      z
        .strictObject({
          /** Shortest `/loop` interval; shorter ones are refused, naming it. */
          min_interval_seconds: atLeastOneSecond(30),
          /** Tick budget per loop; 0 = unlimited. */
          max_ticks: z._default(z.coerce.number().check(z.int()).check(z.gte(0)), 100),
          /** Self-paced loops start at, and snap back to, this delay. */
          self_paced_floor_seconds: atLeastOneSecond(60),
          /** Self-paced delays double up to this. */
          self_paced_ceiling_seconds: atLeastOneSecond(900),
          /**
           * Failed ticks in a row (model or command errors, or `--until` judge
           * failures) after which a loop or heartbeat pauses; 0 = never. @defaultValue 3
           */
          max_consecutive_failures: z._default(z.coerce.number().check(z.int()).check(z.gte(0)), 3),
          /**
           * A failed tick is tried again after this delay, doubled after each further failure in a row,
           * instead of at the schedule's cadence; a success resumes the cadence. @defaultValue 30
           */
          failure_backoff_seconds: atLeastOneSecond(30),
          /** The longest wait between tries of a failing loop or heartbeat (the doubling stops here). @defaultValue 900 */
          failure_backoff_max_seconds: atLeastOneSecond(900),
          /**
           * A loop or heartbeat pauses after `max_consecutive_failures` failed ticks in a row only when
           * they span at least this long (first failure's start to the last's end), so a short outage
           * of the model endpoint never pauses it; 0 = the count alone. @defaultValue 900
           */
          failure_pause_after_seconds: z._default(z.coerce.number().check(z.int()).check(z.gte(0)), 900),
        })
        .check(
          z.refine((l) => l.failure_backoff_max_seconds >= l.failure_backoff_seconds, {
            message: 'failure_backoff_max_seconds must not be below failure_backoff_seconds',
            path: ['failure_backoff_max_seconds'],
          }),
        )
        .check(
          z.refine((l) => l.self_paced_ceiling_seconds >= l.self_paced_floor_seconds, {
            message: 'self_paced_ceiling_seconds must not be below self_paced_floor_seconds',
            path: ['self_paced_ceiling_seconds'],
          }),
        ),
      {},
    ),
  heartbeat: () => z.prefault(z.strictObject({ min_interval_seconds: atLeastOneSecond(60) }), {}),
  goals: () =>
    z.prefault(
      z.strictObject({
        max_turns: positiveInt(20),
        /**
         * Goal turns in a row without a valid verdict (the turn failed, or the judge
         * failed or answered no verdict) after which the goal pauses; 0 = never. @defaultValue 3
         */
        max_consecutive_failures: z._default(z.coerce.number().check(z.int()).check(z.gte(0)), 3),
      }),
      {},
    ),
  agent: () =>
    z.prefault(
      z
        .strictObject({
          /** OpenAI-compatible endpoint (OPENAI_BASE_URL). */
          base_url: z.optional(z.string().check(z.url())),
          model: z._default(z.string(), 'gpt-4o-mini'),
          /** OPENAI_API_KEY; never logged. */
          api_key: z.optional(z.string()),
          /** Per model call. */
          timeout_seconds: seconds(120),
          /**
           * Drain budget, in seconds, of the turns of the `deadline` drain class: loop, heartbeat and
           * cron ticks and `/v1` runs (the name predates loops sharing it); 0 opts them out (docs/DESIGN.md §9,
           * docs/GLOSSARY.md "drain class").
           */
          cron_drain_timeout: seconds(30),
          /** Drain budget, in seconds, of chat turns (user messages, goal continuations); 0 = interrupt at once, mark resumable (docs/DESIGN.md §9). */
          restart_drain_timeout: seconds(0),
          /** Largest accepted prompt or message, in characters. */
          max_prompt_chars: positiveInt(16_000),
          /** Tool calls one turn may make; the call after the limit is refused with a message the model sees. @defaultValue 20 */
          max_tool_calls: z._default(z.coerce.number().check(z.int()).check(z.gte(0)), 20),
          /**
           * The primary model's context window, tokens; unset = from the table of known models by
           * name, else 128000 (`scheduler/models/model-window.ts`; docs/CONTEXT.md). A window learned
           * from a provider's refusal comes first. @defaultValue unset
           */
          context_window_tokens: z.optional(z.coerce.number().check(z.int()).check(z.gte(1024))),
          /** Compaction of what a model call sends (docs/CONTEXT.md; the policy: `worker/context/compaction.ts`). */
          compaction: z.prefault(compactionSchema(), {}),
          /** Input plus output tokens one turn may spend (its calls, judges and summaries); past it the schedule pauses; 0 = no limit. @defaultValue 0 */
          max_tokens_per_turn: z._default(z.coerce.number().check(z.int()).check(z.gte(0)), 0),
          /**
           * Retries of one model call on 429 (honouring `Retry-After`), 5xx and connection errors, with
           * backoff, by the `openai` client (its `maxRetries`), within the turn's time. @defaultValue 3
           */
          max_retries: z._default(z.coerce.number().check(z.int()).check(z.gte(0)).check(z.lte(10)), 3),
          /**
           * Models the operator declares by name, for `--model <name>` on schedules and for
           * `fallback_models`. Each may have its own endpoint and key (default: the agent's) and window.
           */
          models: nameRecord(
            z.strictObject({
              model: z.string().check(z.minLength(1)),
              base_url: z.optional(z.string().check(z.url())),
              api_key: z.optional(z.string()),
              context_window_tokens: z.optional(z.coerce.number().check(z.int()).check(z.gte(1024))),
            }),
            z.string().check(z.regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a model name is letters, digits, ".", "_" or "-" (at most 64)')),
          ),
          /** Declared model names tried in order when a turn's model still fails after its retries (429, 5xx, connection). @defaultValue [] */
          fallback_models: stringList(),
          /**
           * The smallest window, in tokens, a provider's refusal for length that names no number may
           * halve a model's window down to; a request refused at or under it fails the call
           * (`scheduler/models/model-window.ts`, `afterRefusal`; docs/CONTEXT.md "Refusals").
           * @defaultValue 2048
           */
          min_context_window_tokens: z._default(z.coerce.number().check(z.int()).check(z.gte(256)), 2048),
          /**
           * Calls in a row to one endpoint and model that failed for good (429, 5xx, connection or
           * timeout, after the client's retries) after which its circuit breaker opens; 0 = no breaker
           * (`scheduler/models/circuit-breaker.ts`; docs/CONTEXT.md "Circuit breaker"). Shared by every
           * worker through Redis. @defaultValue 3
           */
          breaker_failure_threshold: z._default(z.coerce.number().check(z.int()).check(z.gte(0)), 3),
          /** Seconds an open breaker sends calls straight to the fallback models before one probe call. @defaultValue 60 */
          breaker_cooldown_seconds: z._default(z.coerce.number().check(z.positive()), 60),
        })
        .check(
          z.refine((a) => a.fallback_models.every((n) => Object.hasOwn(a.models, n)), {
            message: 'fallback_models must name models declared under agent.models',
            path: ['fallback_models'],
          }),
        ),
      {},
    ),
  worker: () =>
    z.prefault(
      z.pipe(
        z
          .strictObject({
            /*
             * What one worker process holds and runs at once, bounded separately (docs/OPERATIONS.md,
             * "Held ticks and running turns"; measured in docs/BENCHMARKS.md):
             * - held ticks: ticks fetched `prefetch_lead_ms` before they are due, sleeping until then
             *   (one timer per due instant, locks not renewed while held; ~8 KB of heap each);
             * - agent turns: turns waiting on a model endpoint (the network), so hundreds fit in a process;
             * - command turns: processes on this host, so a few per core.
             * A worker fetches no more overdue work than it can start now, so a fleet shares a backlog.
             */
            /**
             * Ticks a worker process holds before they are due (fetched `prefetch_lead_ms` early and
             * started on time): an aligned burst starts on time when the whole burst fits — 10,000 cron jobs at
             * the top of the hour do (~8 KB of heap each). @defaultValue 16384
             */
            max_held_ticks: positiveInt(16_384),
            /**
             * Turns of the `agent` pool one worker process runs at once: agent turns of loops, heartbeats
             * and cron jobs with their judges, chat messages, goal continuations, `/v1` runs. Lower it to what
             * the model endpoint takes at once. @defaultValue 2048 (`concurrency` when that is set): a
             * top-of-the-hour burst of 2,000 agent cron occurrences starts together (docs/BENCHMARKS.md)
             */
            max_agent_turns: z.optional(z.coerce.number().check(z.int()).check(z.positive())),
            /**
             * Processes one worker process runs at once: command turns (`--run`, `--command`), cron
             * `--script` runs and command tools. @defaultValue 8 (`concurrency` when that is set)
             */
            max_command_turns: z.optional(z.coerce.number().check(z.int()).check(z.positive())),
            /**
             * Before `max_agent_turns` and `max_command_turns`: job slots, held by a tick waiting for its
             * due time and by a running turn alike. Still read: when set, it is the default of both turn
             * limits (held ticks are bounded by `max_held_ticks` either way). @defaultValue unset
             */
            concurrency: z.optional(z.coerce.number().check(z.int()).check(z.positive())),
            /**
             * A command turn (`--run`, `--command`, a cron `--script`) is one step of its occurrence's journal
             * (docs/RELIABILITY.md, "A command turn is one step"): once its result is recorded it never runs
             * again; one that started on a worker that stopped before recording it is in doubt. `rerun` runs
             * it again (at least once: the usual check or report that reads state), `report` ends the turn as
             * failed, its outcome unknown, without running it again (at most once: a command with outside
             * effects). The command gets `HERMES_STEP_ID`, the same on a rerun, to dedupe itself. @defaultValue `rerun`
             */
            command_turn_on_doubt: z._default(z.enum(ON_DOUBT_POLICIES), 'rerun'),
            /*
             * Recovery policy: a worker that dies (SIGKILL, crash, lost host) stops
             * renewing its job locks; a lock lapses at most `lock_duration_ms` after
             * the death, and the next stall check (every `stalled_interval_ms`, by
             * any worker of the fleet) hands the job to another worker. With the
             * defaults a dead worker's tick restarts elsewhere within about 4 s
             * (3 s + 1 s + pick-up); a cron occurrence it held before its due time, within
             * about 4 s after that due time (its lock was set to last until due +
             * `lock_duration_ms`, `WorkerProcess.holdLock`). A live worker renews every `lock_renew_ms`, so
             * only a renewal more than `lock_duration_ms - lock_renew_ms` late (2 s)
             * loses a lock; the turn of a job whose lock was lost is aborted and
             * not committed (`worker-process.ts`), so the occurrence runs to its
             * commit on one worker only. A worker whose renewals do not come back
             * fences the turn off `fence_margin_ms` before its lock can lapse.
             */
            /** BullMQ job lock and session turn lock time-to-live, in ms; renewed while a turn runs. @defaultValue 3000 */
            lock_duration_ms: positiveInt(3_000),
            /**
             * Self-fencing: a turn whose job lock has not been renewed so that it surely lasts more than
             * this many ms is aborted here, its commands killed at once (SIGKILL), before the lock can
             * lapse and another worker take the job over (docs/RELIABILITY.md, "A worker that cannot renew
             * a job's lock stops its turn first"). Below `lock_duration_ms - lock_renew_ms`. @defaultValue 500
             */
            fence_margin_ms: positiveInt(500),
            /** Milliseconds between renewals of a worker's job locks (below `lock_duration_ms`). @defaultValue 1000 */
            lock_renew_ms: positiveInt(1_000),
            /** Milliseconds between checks for jobs whose worker died (lock lapsed). @defaultValue 1000 */
            stalled_interval_ms: positiveInt(1_000),
            /** A job that stalls more often than this fails. */
            max_stalled_count: positiveInt(3),
            /** A tick that finds its session busy is retried after this delay. */
            defer_ms: positiveInt(250),
            /**
             * Tries of one session input (a message or slash command) whose handling throws — a failed model
             * call is not that: it is answered as a failed turn — before the input is set aside, so the
             * session's next input runs (docs/RELIABILITY.md, "Session input runs in order, and a bad input
             * is set aside"). @defaultValue 3
             */
            input_attempts: positiveInt(3),
            /** Milliseconds before an input's second try, doubled before each further one. @defaultValue 1000 */
            input_retry_delay_ms: positiveInt(1000),
            /**
             * Seconds set-aside input stays readable (`hermes status`, the console's session page,
             * `GET /api/sessions/:id/set-aside`); each session keeps its newest 50. @defaultValue 604800 (7 days)
             */
            set_aside_retention_seconds: positiveInt(604_800),
            /**
             * Ticks are handed to a worker this long before they are due and started
             * exactly on time, so queue latency is off the critical path: long enough for
             * a worker to fetch an aligned burst of 1,000 ticks before it is due on the
             * 2-core machine (docs/BENCHMARKS.md, "Held ticks and command turns"). A job
             * scheduler armed for an occurrence due sooner than the lead (a first tick
             * "now") releases its first job `FIRST_RELEASE_MS` (200 ms) after arming, never
             * at once, so a re-arm right after replaces it before a worker can take it
             * (`scheduler/loop/prefetch-lead.ts`; test/scheduler-upsert.test.ts, F1): a
             * loop's first tick then comes ~1.2 s after it is set. @defaultValue 1000
             */
            prefetch_lead_ms: z._default(z.coerce.number().check(z.int()).check(z.gte(0)), 1000),
            /**
             * A held tick's claim is made this long before its due time, so that its turn starts on
             * the due time itself instead of a claim round trip later: the claim script runs ahead
             * (session lock, in-flight mark, `tick.started`, the transcript), the turn starts at the due
             * time, never before. The rule and what it changes: `worker/loop/claim-ahead.ts` (a held cron
             * occurrence's overlap lock and claim: `worker/cron/cron-claim-ahead.ts`). At most
             * `prefetch_lead_ms` in effect (a tick is claimed no earlier than it is fetched); 0: claimed
             * at the due time. @defaultValue 300
             */
            claim_lead_ms: z._default(z.coerce.number().check(z.int()).check(z.gte(0)), 300),
            /** Transcript messages kept per session (older ones are trimmed). */
            transcript_max_messages: positiveInt(200),
            /**
             * Entries kept per session event stream (`XADD MAXLEN ~`, so Redis may keep
             * a few more): the history `hermes chat` replays on reattach and
             * `/api/sessions/:id/events` serves. With the transcript cap, what bounds
             * a session's memory (docs/OPERATIONS.md). @defaultValue 10000
             */
            events_max_entries: positiveInt(10_000),
            /**
             * Shards of the key space this worker consumes (`0,2,4`); empty = every shard
             * of `redis.shards`. @defaultValue []
             */
            shards: z._default(commaList(z.array(z.coerce.number().check(z.int()).check(z.gte(0)))), []),
            /**
             * Seconds a committed occurrence (tick, message, cron run) is remembered
             * for exactly-once, in one sorted set per session or cron job. Must exceed
             * the longest time a job can come back after its commit (a stalled job:
             * `lock_duration_ms` + `stalled_interval_ms`; cron retries: seconds).
             * @defaultValue 3600
             */
            occurrence_window_seconds: z._default(z.coerce.number().check(z.int()).check(z.gte(60)), 3600),
            /**
             * Port of this worker's `GET /metrics` (Prometheus), bound to `api_server.host`; unset = no
             * metrics server. Behind the gateway's key (`api_server.key`, else the home's key file) unless
             * `metrics.public`. @defaultValue unset
             */
            metrics_port: z.optional(z.coerce.number().check(z.int()).check(z.gte(0)).check(z.lte(65535))),
          })
          .check(
            z.refine((w) => w.lock_renew_ms < w.lock_duration_ms, {
              message: 'lock_renew_ms must be below lock_duration_ms (a lock must be renewed before it lapses)',
              path: ['lock_renew_ms'],
            }),
          )
          .check(
            z.refine((w) => w.fence_margin_ms < w.lock_duration_ms - w.lock_renew_ms, {
              message: 'fence_margin_ms must be below lock_duration_ms - lock_renew_ms (a turn is fenced only after a renewal came late)',
              path: ['fence_margin_ms'],
            }),
          ),
        z.transform(({ max_agent_turns, max_command_turns, ...w }) => ({
          ...w,
          max_agent_turns: max_agent_turns ?? w.concurrency ?? 2048,
          max_command_turns: max_command_turns ?? w.concurrency ?? 8,
        })),
      ),
      {},
    ),
  telemetry: () =>
    z.prefault(
      z.strictObject({
        /**
         * Base address of an OTLP/HTTP collector (Jaeger, Tempo, an OpenTelemetry Collector, Honeycomb): each
         * worker and gateway sends its traces to `<it>/v1/traces` (docs/OPERATIONS.md, "Traces").
         * `OTEL_EXPORTER_OTLP_ENDPOINT` sets it too. @defaultValue unset (no traces; the SDK is not loaded)
         */
        otlp_endpoint: z.optional(z.string().check(z.url())),
        /** The `service.name` of every span (`OTEL_SERVICE_NAME`). @defaultValue `hermes` */
        service_name: z._default(z.string().check(z.minLength(1)), 'hermes'),
      }),
      {},
    ),
  metrics: () =>
    z.prefault(
      z.strictObject({
        /**
         * Serve `/metrics` (the gateway's and a worker's) without the API key, for a Prometheus that cannot
         * send one: anyone who reaches the address reads the fleet's counts. @defaultValue false
         */
        public: flag(false),
      }),
      {},
    ),
  housekeeping: () =>
    z.prefault(
      z.strictObject({
        /**
         * When each process checks the worker liveness set (a cron expression for node-cron, which runs the timer; 5 fields,
         * or 6 with seconds):
         * long-dead workers are forgotten, and a WARNING is logged while none is alive. @defaultValue every 5 minutes
         */
        workers_cron: z
          ._default(z.string(), '*/5 * * * *')
          .check(z.refine(isTimerExpression, { message: 'must be a cron expression (5 fields, or 6 with seconds)' })),
        /** Liveness entries older than this many seconds are removed. @defaultValue 3600 */
        worker_forget_seconds: positiveInt(3600),
      }),
      {},
    ),
  dashboard: () =>
    z.prefault(
      z.strictObject({
        /** The queue dashboard at `/admin/queues` only shows (no retry, remove, pause). @defaultValue true */
        read_only: flag(true),
      }),
      {},
    ),
  /**
   * Tools of agent turns, declared by the operator only (chat, Telegram and
   * `/v1` input can never add one). See docs/TOOLS.md.
   */
  tools: () =>
    z.prefault(
      z.strictObject({
        /** Longest a tool call may run, seconds (a command's own `timeout_seconds` wins). @defaultValue 30 */
        timeout_seconds: z._default(z.coerce.number().check(z.positive()), 30),
        /**
         * Bytes of a tool's result the model sees. A longer result keeps its head and its tail
         * (`result_head_share`) with a marker in the middle naming what was left out (docs/TOOLS.md,
         * "Big results"). @defaultValue 16384
         */
        max_result_bytes: positiveInt(16_384),
        /**
         * Share of `max_result_bytes` a cut result keeps from its head; the rest goes to its tail,
         * where a log's verdict is. Also the split of a message cut to fit a model's window.
         * @defaultValue 0.25
         */
        result_head_share: z._default(z.coerce.number().check(z.gte(0)).check(z.lte(1)), 0.25),
        /**
         * Bytes of a watched file (`--watch read_file:<path>`) digested as a whole, streamed; a larger
         * file is digested by its size, its first bytes and its last `watch_max_bytes`
         * (docs/CONTEXT.md, "Watches"). @defaultValue 33554432 (32 MiB)
         */
        watch_max_bytes: positiveInt(32 * 1024 * 1024),
        /**
         * Largest output a watch keeps (in Redis, per schedule) to hand its next change over as a
         * unified diff; a larger output's changes go over as what was appended, or its head and tail.
         * @defaultValue 262144 (256 KiB)
         */
        watch_diff_max_bytes: positiveInt(256 * 1024),
        /** `read_file` and `list_dir` inside these folders (symlinks resolved). @defaultValue none */
        files: z.prefault(
          z.strictObject({
            /** Folders `read_file` and `list_dir` may read; absolute paths only (a relative one would depend on the worker's cwd). */
            roots: z._default(
              z.array(
                z
                  .string()
                  .check(z.minLength(1))
                  .check(z.refine(isAbsolute, { message: 'must be an absolute path (e.g. /srv/deploy), not relative' })),
              ),
              [],
            ),
            /**
             * Bytes of one file `read_file` reads through in a call: up to it a cut result's marker
             * names exact line numbers and `offset` reaches any line; past it only the file's first and
             * last bytes are read, and `tail_lines` reads back at most this far. @defaultValue 67108864 (64 MiB)
             */
            max_scan_bytes: positiveInt(64 * 1024 * 1024),
          }),
          {},
        ),
        /** `http_get` to these hosts (`example.com` or `example.com:8080`). @defaultValue none */
        http: z.prefault(z.strictObject({ allow: z._default(z.array(z.string().check(z.minLength(1))), []) }), {}),
        /** Commands the agent may call, one function tool each. */
        commands: nameRecord(
          toolCommandSchema(),
          z.string().check(z.regex(/^[a-zA-Z0-9_-]{1,64}$/, 'tool names use letters, digits, _ and -')),
        ),
        /**
         * Which surfaces may use a tool or group (`files`, `http`, `commands`, `mcp`,
         * `schedule_status`, a command's name, an MCP server's name or `<server>__<tool>`).
         * A tool not named here is open to every surface (the operator declared it).
         */
        allow_from: nameRecord(z.array(z.enum(TOOL_SURFACES))),
        /**
         * What a resumed turn does with a call in doubt — started by a run of the turn that ended
         * before its result was recorded (docs/RELIABILITY.md, "The step in doubt"): `rerun` runs it
         * again, `report` tells the model its outcome is unknown and runs nothing. Keyed like
         * `allow_from` (a tool's name, a command's name, `commands`, `mcp`, an MCP server's name or
         * `<server>__<tool>`; the most specific name found decides). @defaultValue `rerun` for the
         * built-in read-only tools (`read_file`, `list_dir`, `http_get`, `schedule_status`), `report`
         * for every other tool
         */
        on_doubt: nameRecord(z.enum(ON_DOUBT_POLICIES)),
        /**
         * The built-in `schedules` tool: the agent creates and manages the loops, heartbeats and
         * cron jobs of the chat it talks in (docs/TOOLS.md). `HERMES_TOOLS_SCHEDULES=off` turns it off.
         */
        schedules: z.prefault(
          z.pipe(
            z.transform((v) => (typeof v === 'string' || typeof v === 'boolean' ? { enabled: v } : v)),
            z.strictObject({
              /** Offer the tool at all; `false` hides it from every turn. @defaultValue true */
              enabled: flag(true),
              /**
               * Turns that may use it, each of a turn's surfaces (and, for a tick, a goal turn or a cron
               * run, its kind) must be listed: so by default a scheduled turn cannot schedule more turns.
               * A self-paced loop's tick may always pace itself (action `next`). @defaultValue [cli, chat, telegram, slack, discord]
               */
              allow_from: z._default(commaList(z.array(z.enum(SCHEDULE_TOOL_SURFACES))), ['cli', 'chat', 'telegram', 'slack', 'discord']),
              /** Active and paused schedules a session may have (its loop, heartbeat and cron jobs) before the agent may create another. @defaultValue 10 */
              max_per_session: positiveInt(10),
              /** Schedules the agent may create per session in any 24 hours (replaced and removed ones count). @defaultValue 20 */
              max_created_per_day: positiveInt(20),
              /**
               * Schedules one turn may create: the call after the limit is refused (the model is told to ask the user),
               * so no single answer, whatever text it read, makes a batch of unattended schedules. @defaultValue 3
               */
              max_created_per_turn: positiveInt(3),
            }),
          ),
          {},
        ),
      }),
      {},
    ),
  /**
   * `hermes mcp` and the gateway's `/mcp`: this product as an MCP server for other agents (surface
   * `mcp`; docs/MCP.md). What its clients may do, with the safeguards of the `schedules` tool.
   */
  mcp: () =>
    z.prefault(
      z.strictObject({
        /**
         * The MCP tools offered (`create_schedule`, `list_schedules`, `update_schedule`, `pause_schedule`,
         * `resume_schedule`, `remove_schedule`, `run_schedule`, `next`, `runs`, `send`, `status`); one not
         * listed is neither listed nor callable. @defaultValue every one
         */
        tools: z._default(commaList(z.array(z.enum(MCP_TOOL_NAMES))), [...MCP_TOOL_NAMES]),
        /**
         * Let MCP clients make command turns (a loop's `command`, a cron job's `script`) and change,
         * resume or run jobs that have one. Off: they are refused, nothing is written. @defaultValue false
         */
        command_turns: flag(false),
        /** Schedules MCP clients may create, all sessions together, in any 24 hours (removed ones count). @defaultValue 20 */
        max_created_per_day: positiveInt(20),
      }),
      {},
    ),
  /**
   * Signed webhooks that start turns or run cron jobs: `POST /hooks/<name>` (docs/GATEWAY.md
   * "Webhooks"). The route takes no API key: each hook's signature is its key.
   */
  hooks: () =>
    nameRecord(hookSchema(), z.string().check(z.regex(/^[a-zA-Z0-9_-]{1,32}$/, 'hook names use letters, digits, _ and - (at most 32)'))),
  /** MCP servers whose tools agent turns may call, named `<server>__<tool>`. */
  mcp_servers: () =>
    nameRecord(mcpServerSchema(), z.string().check(z.regex(/^[a-zA-Z0-9_-]{1,32}$/, 'server names use letters, digits, _ and -'))),
  /** Named commands for command turns: `hermes loop … --command NAME`. */
  commands: () => nameRecord(commandSchema()),
  /**
   * What every command turn (loop `--run`, `--command`, cron `--script`) gets from the worker's
   * environment besides PATH, HOME, LANG, LC_ALL, TZ, TMPDIR (`worker/runtime/command-env.ts`).
   */
  command_env: () =>
    z.prefault(
      z.strictObject({
        /** Names of variables passed through to every command. @defaultValue [] */
        pass: envNameList,
      }),
      {},
    ),
  cron: () =>
    z.prefault(
      z.strictObject({
        /** Kill a `--script` job's command after this many seconds. @defaultValue 120 */
        script_timeout_seconds: seconds(120),
        /** Run records kept per cron job (older ones are dropped). @defaultValue 50 */
        history_limit: positiveInt(50),
        /** Shortest time between two fires of any cron job (intervals, calendar phrases, 5- and 6-field cron), in seconds. @defaultValue 60 */
        min_interval_seconds: seconds(60),
        /** Longest schedule text accepted (`hermes cron add`, `/api`), characters; checked before it is parsed. @defaultValue 256 */
        max_schedule_chars: z._default(z.coerce.number().check(z.int()).check(z.gte(32)).check(z.lte(4096)), 256),
        /** Lower clamp of the misfire grace window (half the period), in seconds. @defaultValue 120 */
        misfire_grace_min_seconds: seconds(120),
        /** Upper clamp of the misfire grace window, in seconds. @defaultValue 7200 */
        misfire_grace_max_seconds: seconds(7200),
        /**
         * Most occurrences one backfill request may queue (`hermes cron backfill`); a window with more is
         * refused whole. @defaultValue 100
         */
        max_backfill_occurrences: positiveInt(100),
        /**
         * `--misfire all`: how far back, in seconds, missed occurrences are still run after an outage, unless a
         * job sets `--catchup-window` (at most `max_backfill_occurrences` of them, the newest). @defaultValue 86400
         */
        catchup_window_seconds: z._default(z.coerce.number().check(z.int()).check(z.gte(1)), 86_400),
        /**
         * A scheduled cron occurrence's job is released to the queue this many ms before it is due, and the
         * worker that takes it holds it and starts its turn on the due time (as `worker.prefetch_lead_ms` does
         * for loops): longer than a loop's, because the top of the hour puts thousands of cron jobs on one
         * instant and one worker fetches them at a few thousand a second (docs/BENCHMARKS.md, "Top of the
         * hour"). The rule: `scheduler/cron/repeat-strategy.ts`. 0: released when due; at most 30000 (a worker
         * holds a job at most 30 s before it is due, `MAX_IN_PROCESS_WAIT_MS`). @defaultValue 10000
         */
        prefetch_lead_ms: z._default(z.coerce.number().check(z.int()).check(z.gte(0)).check(z.lte(30_000)), 10_000),
        /** Time a webhook target has to answer, in seconds. @defaultValue 10 */
        webhook_timeout_seconds: seconds(10),
        /**
         * Characters of a parent run's output (its reply, or its error) offered to the turn of a job that runs after
         * it (`--after`); a longer output is cut, and the turn is told so. @defaultValue 4000
         */
        after_output_max_chars: z._default(z.coerce.number().check(z.int()).check(z.gte(0)).check(z.lte(8000)), 4000),
        /** Failed runs in a row after which a cron job is paused; 0 = never. @defaultValue 3 */
        max_consecutive_failures: z._default(z.coerce.number().check(z.int()).check(z.gte(0)), 3),
        /**
         * Occurrences a job with `--overlap buffer_all` keeps waiting behind its running one; one due
         * while that many wait is recorded as skipped (reason `buffer-full`). @defaultValue 10
         */
        max_buffered_occurrences: positiveInt(10),
        /**
         * First delay before a run whose model could not be reached is tried again, in seconds;
         * each further attempt waits twice as long (BullMQ exponential backoff, 3 attempts). @defaultValue 2
         */
        retry_backoff_seconds: seconds(2),
      }),
      {},
    ),
  delivery: () =>
    z.prefault(
      z.strictObject({
        /**
         * Webhook hosts (names or IP addresses, matched exactly) and CIDR ranges that delivery may
         * reach although they are internal; every other loopback, private, link-local or reserved
         * address is refused (scheduler/delivery/webhook-policy.ts). A comma list in the environment. @defaultValue []
         */
        webhook_allow: z._default(commaList(z.array(z.string())), []).check(
          z.superRefine((entries, ctx) => {
            try {
              parseWebhookAllow(entries);
            } catch (err) {
              ctx.addIssue({ code: 'custom', message: (err as Error).message });
            }
          }),
        ),
        /**
         * Secret every webhook delivery (cron jobs, loops, heartbeats) is signed with:
         * `X-Hermes-Signature-256: sha256=<HMAC-SHA256 of the body>` (worker/runtime/webhook-sender.ts).
         * Unset: deliveries are not signed. @defaultValue unset
         */
        webhook_secret: z.optional(z.string().check(z.minLength(16, 'delivery.webhook_secret must be at least 16 characters'))),
      }),
      {},
    ),
  api_server: () =>
    z.prefault(
      z
        .strictObject({
          /**
           * Address the HTTP server binds (API_SERVER_HOST): an IP address or a host name,
           * surrounding spaces trimmed. @defaultValue `127.0.0.1`
           */
          host: z._default(
            z
              .string()
              .check(z.trim())
              .check(
                z.refine(
                  (h) => isIP(h) !== 0 || /^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(h),
                  {
                    message: 'must be an IP address or a host name (e.g. 127.0.0.1, ::1, localhost)',
                  },
                ),
              ),
            '127.0.0.1',
          ),
          port: z._default(z.coerce.number().check(z.int()).check(z.gte(0)).check(z.lte(65535)), 8642),
          /**
           * API_SERVER_KEY: the key every HTTP route but `/health*` requires (`Authorization: Bearer`, or
           * the Basic password in a browser). Blank counts as unset; unset, the home's own key file
           * `$HERMES_HOME/api.key` is used, made at the first start (scheduler/config/api-key.ts).
           * @defaultValue the home's key file
           */
          key: z.optional(
            z.pipe(
              z.pipe(
                z.string(),
                z.transform((k) => k.trim()),
              ),
              z.transform((k) => (k.length > 0 ? k : undefined)),
            ),
          ),
          /**
           * Serve the HTTP API and a worker's metrics port with no key at all: every user of this host
           * can then act as the operator over HTTP (run turns, read and write every session, set
           * schedules). Loopback binds only; the banner and a warning say so. Not with `key`
           * (`--insecure-no-auth` of `hermes up` and `hermes gateway`). @defaultValue false
           */
          insecure_no_auth: flag(false),
          /**
           * Open event streams (SSE) and waiting `/v1` callers one gateway serves at once; beyond it
           * requests get 429. They share one Redis reader, so this bounds memory, not connections.
           * @defaultValue 500
           */
          max_streams: positiveInt(500),
          /**
           * Bytes of events an event stream (SSE) may hold unsent for its client; a client that does
           * not read past it is disconnected (it resumes with `Last-Event-ID`). @defaultValue 1048576 (1 MiB)
           */
          sse_max_buffered_bytes: positiveInt(1_048_576),
          /**
           * Records in one page of a list when the caller names no `limit`: `/api/cron/jobs`, `/api/schedules`,
           * `/api/sessions`, the console's overview, `hermes cron list` and `hermes status` (without `--all`).
           * @defaultValue 50
           */
          page_size: positiveInt(50),
          /** The largest `limit` a list answers; more is a 400. Not below `page_size`. @defaultValue 500 */
          max_page_size: positiveInt(500),
          /** Deepest nesting of arrays and objects in a JSON body; deeper is a 400 naming the field. @defaultValue 64 */
          max_json_depth: positiveInt(64),
          /**
           * Connections the HTTP server (and a worker's metrics server) holds at once (`server.maxConnections`);
           * near it the oldest idle ones (no request in progress) are closed to make room. @defaultValue 1024
           */
          max_connections: positiveInt(HTTP_LIMIT_DEFAULTS.max_connections),
          /** A connection must send a request's complete headers within this, ms (`server.headersTimeout`; then 408 and closed). @defaultValue 10000 */
          headers_timeout_ms: positiveInt(HTTP_LIMIT_DEFAULTS.headers_timeout_ms),
          /** A request must be received completely (headers and body) within this, ms (`server.requestTimeout`); answers may take longer. @defaultValue 30000 */
          request_timeout_ms: positiveInt(HTTP_LIMIT_DEFAULTS.request_timeout_ms),
          /** An idle keep-alive connection is closed after this, ms (`server.keepAliveTimeout`). @defaultValue 5000 */
          keep_alive_timeout_ms: positiveInt(HTTP_LIMIT_DEFAULTS.keep_alive_timeout_ms),
        })
        .check(
          z.refine((a) => a.page_size <= a.max_page_size, {
            message: 'page_size must not exceed max_page_size',
            path: ['page_size'],
          }),
        )
        .check(
          z.refine((a) => a.headers_timeout_ms <= a.request_timeout_ms, {
            message: 'headers_timeout_ms must not exceed request_timeout_ms',
            path: ['headers_timeout_ms'],
          }),
        )
        .check(
          z.refine((a) => !(a.insecure_no_auth && a.key), {
            message: 'an API key is set (API_SERVER_KEY or api_server.key), so the API cannot also run without one: drop one of the two',
            path: ['insecure_no_auth'],
          }),
        ),
      {},
    ),
  gateway: () =>
    z.prefault(
      z.strictObject({
        /**
         * Backoff steps in seconds between re-arms of a failed platform plugin
         * load and between reconnects; the last step repeats (docs/DESIGN.md §8).
         * @defaultValue [30, 60, 120, 240, 300]
         */
        reconnect_backoff_seconds: secondsList([30, 60, 120, 240, 300]),
        /** Re-arms of a failed plugin load per platform before giving up. @defaultValue 3 */
        max_plugin_load_rearms: z._default(z.coerce.number().check(z.int()).check(z.gte(0)), 3),
        /** A plugin load taking longer than this counts as failed (it may keep hanging). @defaultValue 30 */
        plugin_load_timeout_seconds: seconds(30),
        /** Seconds between looks of the reconnect watcher at failed platforms. @defaultValue 5 */
        watcher_interval_seconds: seconds(5),
        /**
         * Time-to-live of the one-poller-per-bot-token lease, seconds; renewed every third.
         * Short, so a gateway that died (SIGKILL, power loss) holds the bot for at most this
         * long: its restart, or a standby gateway, polls again within it. @defaultValue 4
         */
        poll_lease_ttl_seconds: z._default(z.coerce.number().check(z.positive()), 4),
        /** `timeout` of Telegram's getUpdates long poll, whole seconds. @defaultValue 25 */
        poll_timeout_seconds: z._default(z.coerce.number().check(z.int()).check(z.gte(0)).check(z.lte(50)), 25),
        /** First wait after a 409 Conflict or network error of getUpdates, seconds; doubles per failure. @defaultValue 1 */
        poll_retry_initial_seconds: z._default(z.coerce.number().check(z.positive()), 1),
        /** Cap of that wait, seconds. @defaultValue 30 */
        poll_retry_max_seconds: z._default(z.coerce.number().check(z.positive()), 30),
        /** A Telegram 429 asking to wait longer than this fails the send (the queue retries it later). @defaultValue 300 */
        max_retry_after_seconds: seconds(300),
        /**
         * On close, how long sends in progress may finish before they are cancelled
         * through their AbortSignal (the queue retries them later), seconds. @defaultValue 5
         */
        outbound_stop_timeout_seconds: seconds(5),
        /** Seconds between two Telegram typing indicators while a message waits for its answer. @defaultValue 4 */
        typing_refresh_seconds: z._default(z.coerce.number().check(z.positive()), 4),
        /** Outbound messages the gateway sends at once (different chats; one chat sends in queue order). @defaultValue 4 */
        outbound_concurrency: positiveInt(4),
        /**
         * A reply queued behind an unfinished earlier reply of its chat looks again after this
         * many milliseconds (it is woken at once when the earlier one finishes). @defaultValue 2000
         */
        outbound_order_recheck_ms: positiveInt(2000),
        /** How long a `/v1` caller waits for its run before a 504, seconds. @defaultValue 600 */
        run_timeout_seconds: z._default(z.coerce.number().check(z.positive()), 600),
        /** How long `/v1` run records, their events and idempotency keys are kept, seconds. @defaultValue 86400 */
        run_ttl_seconds: positiveInt(86_400),
        /**
         * Longest wait of the gateway on one Redis command, ms; a request that would wait longer is
         * answered 503 with Retry-After (and `/health/ready` reports Redis down). @defaultValue 2000
         */
        redis_timeout_ms: positiveInt(2_000),
        /** `/health/ready` needs a worker heartbeat at most this old, seconds. @defaultValue 30 */
        ready_worker_max_age_seconds: z._default(z.coerce.number().check(z.positive()), 30),
      }),
      {},
    ),
  telegram: () =>
    z.prefault(
      z.strictObject({
        bot_token: z.optional(z.string()),
        /** Numeric Telegram user ids allowed to reach the agent. */
        allowed_users: userIdList(),
        /** Bot API root; default the public one. */
        api_root: z.optional(z.string().check(z.url())),
        /**
         * A user outside the allow-list gets at most one refusal per chat in this many seconds
         * (kept in Redis, so it holds across restarts and gateways). @defaultValue 3600
         */
        refusal_interval_seconds: positiveInt(3600),
      }),
      {},
    ),
  slack: () =>
    z.prefault(
      z.strictObject({
        /** Bot token (`xoxb-…`): the Web API calls (`auth.test`, `chat.postMessage`). The platform is on when it is set. */
        bot_token: z.optional(z.string()),
        /** Signing secret: the `X-Slack-Signature` (v0) of every request to `POST /slack/events` is checked against it. */
        signing_secret: z.optional(z.string()),
        /** App-level token (`xapp-…`): with it, events arrive over Socket Mode instead of HTTP. */
        app_token: z.optional(z.string()),
        /** Slack user ids (`U…`, `W…`) allowed to reach the agent. */
        allowed_users: userIdList(),
        /** Web API root, ending in `/`; default the public one (`https://slack.com/api/`). */
        api_url: z.optional(z.string().check(z.url())),
        /**
         * A user outside the allow-list gets at most one refusal per channel in this many seconds
         * (kept in Redis, so it holds across restarts and gateways). @defaultValue 3600
         */
        refusal_interval_seconds: positiveInt(3600),
      }),
      {},
    ),
  /** The Discord bot (docs/GATEWAY.md "Discord"). Enabled when `bot_token` is set. */
  discord: () =>
    z.prefault(
      z.strictObject({
        /** The bot's token (Developer Portal → Bot → Token). */
        bot_token: z.optional(z.string()),
        /** Discord user ids (snowflakes) allowed to reach the agent; empty allows nobody. */
        allowed_users: userIdList(),
        /** REST API root without the version (`/v10` is appended); default the public one. @defaultValue https://discord.com/api */
        api_url: z._default(z.string().check(z.url()), 'https://discord.com/api'),
        /**
         * Ask for the privileged Message Content intent. Direct messages and messages that mention
         * the bot carry their text without it; turn it on (and in the Developer Portal) only for
         * text Discord would otherwise blank. @defaultValue false
         */
        message_content_intent: flag(false),
        /** Register `/loop`, `/heartbeat`, `/goal`, `/stop`, `/status` as application commands at start. @defaultValue true */
        register_commands: flag(true),
        /**
         * A user outside the allow-list gets at most one refusal per channel in this many seconds
         * (kept in Redis, so it holds across restarts and gateways). @defaultValue 3600
         */
        refusal_interval_seconds: positiveInt(3600),
      }),
      {},
    ),
};

type TopLevel = typeof TOP_LEVEL;
type Sections = typeof SECTIONS;
/** A section of the configuration (`redis`, `loops`, `agent`, …). */
export type ConfigSection = keyof Sections;
type ConfigShape = TopLevel & { [K in ConfigSection]: ReturnType<Sections[K]> };
/** The whole configuration's schema: every setting and section, strict, with the rules across sections. */
export type ConfigSchema = z.ZodMiniObject<ConfigShape, z.core.$strict>;
/** The validated settings (without `home`). */
export type ConfigValues = z.output<ConfigSchema>;

const SECTION_NAMES = Object.keys(SECTIONS) as ConfigSection[];
const builtSections = new Map<ConfigSection, z.ZodMiniType>();

/** The schema of one section, built on first use. */
function sectionSchema<K extends ConfigSection>(name: K): ReturnType<Sections[K]> {
  let schema = builtSections.get(name);
  if (!schema) builtSections.set(name, (schema = SECTIONS[name]()));
  return schema as ReturnType<Sections[K]>;
}

/** The rule across sections: a worker's shards exist (`worker.shards` below `redis.shards`). */
const SHARDS_RULE = {
  holds: (c: { worker: { shards: number[] }; redis: { shards: number } }) => c.worker.shards.every((n) => n < c.redis.shards),
  message: 'every shard must be below redis.shards (shards are numbered from 0)',
  path: ['worker', 'shards'],
};

let fullSchema: ConfigSchema | undefined;
/**
 * The whole configuration's schema, every section built (the settings the docs must name are walked from it).
 * `loadConfig` parses with the sections it is given only, and fills the others with their defaults.
 */
export function configSchema(): ConfigSchema {
  fullSchema ??= z
    .strictObject({ ...TOP_LEVEL, ...Object.fromEntries(SECTION_NAMES.map((n) => [n, sectionSchema(n)])) } as ConfigShape)
    .check(z.refine(SHARDS_RULE.holds, { message: SHARDS_RULE.message, path: SHARDS_RULE.path }));
  return fullSchema;
}

/**
 * A configuration parse is done once per process, so it runs without zod's generated fast path
 * (`jitless`): generating and compiling that code costs more than the one parse it would speed up,
 * and every `hermes` call pays it (docs/BENCHMARKS.md, "CLI start-up").
 */
const ONCE: z.core.ParseContext<z.core.$ZodIssue> = { jitless: true };

let defaults: Readonly<ConfigValues> | undefined;
/**
 * The configuration with nothing set: every default, read from the schema above (the one place a
 * default is written). Code that is given no setting falls back to these, never to a number of its own.
 * Each section is parsed on first use, not at import: most processes never ask.
 */
export function configDefaults(): Readonly<ConfigValues> {
  defaults ??= withSectionDefaults(z.object(TOP_LEVEL).parse({}, ONCE), []);
  return defaults;
}

/**
 * `values` (the top-level settings and the sections in `given`, validated) with every other section
 * added as its defaults. An absent section is its defaults whatever a call reads, so it is parsed when
 * first read (the property then holds the value; assigning to it replaces it), not at load.
 */
function withSectionDefaults(values: Record<string, unknown>, given: readonly ConfigSection[]): ConfigValues {
  const config: Record<string, unknown> = {};
  for (const key of Object.keys(TOP_LEVEL)) if (Object.hasOwn(values, key)) config[key] = values[key];
  for (const name of SECTION_NAMES) {
    if (given.includes(name)) {
      config[name] = values[name];
      continue;
    }
    const settle = (value: unknown) => Object.defineProperty(config, name, { value, writable: true, enumerable: true, configurable: true });
    Object.defineProperty(config, name, {
      enumerable: true,
      configurable: true,
      get: () => {
        const value: unknown = sectionSchema(name).parse(undefined, ONCE);
        settle(value);
        return value;
      },
      set: settle,
    });
  }
  return config as ConfigValues;
}

/** The validated configuration plus where it came from. */
export type HermesConfig = ConfigValues & {
  /** Absolute `HERMES_HOME`. */
  home: string;
};

/** Environment variables with names of their own (docs/DESIGN.md §10), mapped to config paths. */
const NAMED_ENV: Record<string, string[]> = {
  REDIS_URL: ['redis', 'url'],
  REDIS_CLUSTER_NODES: ['redis', 'cluster_nodes'],
  REDIS_SENTINELS: ['redis', 'sentinels'],
  REDIS_SENTINEL_NAME: ['redis', 'sentinel_name'],
  REDIS_PASSWORD: ['redis', 'password'],
  REDIS_USERNAME: ['redis', 'username'],
  API_SERVER_KEY: ['api_server', 'key'],
  API_SERVER_HOST: ['api_server', 'host'],
  API_SERVER_PORT: ['api_server', 'port'],
  TELEGRAM_BOT_TOKEN: ['telegram', 'bot_token'],
  TELEGRAM_ALLOWED_USERS: ['telegram', 'allowed_users'],
  TELEGRAM_API_ROOT: ['telegram', 'api_root'],
  SLACK_BOT_TOKEN: ['slack', 'bot_token'],
  SLACK_SIGNING_SECRET: ['slack', 'signing_secret'],
  SLACK_APP_TOKEN: ['slack', 'app_token'],
  SLACK_ALLOWED_USERS: ['slack', 'allowed_users'],
  SLACK_API_URL: ['slack', 'api_url'],
  DISCORD_BOT_TOKEN: ['discord', 'bot_token'],
  DISCORD_ALLOWED_USERS: ['discord', 'allowed_users'],
  DISCORD_API_URL: ['discord', 'api_url'],
  OPENAI_BASE_URL: ['agent', 'base_url'],
  OPENAI_API_KEY: ['agent', 'api_key'],
  OPENAI_MODEL: ['agent', 'model'],
  OTEL_EXPORTER_OTLP_ENDPOINT: ['telemetry', 'otlp_endpoint'],
  OTEL_SERVICE_NAME: ['telemetry', 'service_name'],
};

/** Resolve `HERMES_HOME` (default `~/.hermes`). */
export function resolveHome(env: NodeJS.ProcessEnv = process.env): string {
  return env.HERMES_HOME && env.HERMES_HOME.length > 0 ? env.HERMES_HOME : join(homedir(), '.hermes');
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const part of path.slice(0, -1)) {
    const next = node[part];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
}

/** The value at `path` of the raw (not yet validated) settings, or `undefined`. */
function valueAt(raw: unknown, path: readonly PropertyKey[]): unknown {
  let node = raw;
  for (const part of path) {
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Record<PropertyKey, unknown>)[part];
  }
  return node;
}

/**
 * A validation message that names the value as typed: a number coerced from
 * `abc` reads "expected a number, got "abc"", not zod's "received NaN".
 */
function issueMessage(issue: z.core.$ZodIssue, typed: unknown): string {
  if (
    issue.code === 'invalid_type' &&
    (issue.expected === 'number' || issue.expected === 'int') &&
    typed !== undefined &&
    typeof typed !== 'number'
  ) {
    return `expected a ${issue.expected === 'int' ? 'whole number' : 'number'}, got ${JSON.stringify(typed)}`;
  }
  return issue.message;
}

/**
 * The warning for a `$HERMES_HOME/config.yaml` that group or others may read (it may hold
 * `agent.api_key`, `telegram.bot_token`, `api_server.key` and the commands a worker runs), or
 * `undefined`. The long-running processes log it once at start. One others may write never gets
 * this far: `loadConfig` refuses it (`assertTrustedHome`).
 */
export function configFileWarning(home: string): string | undefined {
  const file = join(home, 'config.yaml');
  let mode: number;
  try {
    mode = statSync(file).mode;
  } catch {
    return undefined;
  }
  if ((mode & 0o044) === 0) return undefined;
  const who = (mode & 0o004) !== 0 ? 'others' : 'its group';
  return `${file} is readable by ${who} (mode 0${(mode & 0o777).toString(8)}) and may hold keys and commands; chmod 600 ${file}`;
}

/**
 * Every `HERMES_<SECTION>_<KEY>` override the schema knows (and `HERMES_TIMEZONE`, `HERMES_LOG_LEVEL`),
 * derived from the schema itself, then the named variables; in schema order. Only the sections an
 * environment variable's name may belong to are built to look their keys up.
 */
function envOverrides(env: NodeJS.ProcessEnv): Array<[string[], string, string]> {
  const found: Array<{ order: number; override: [string[], string, string] }> = [];
  const topLevel = Object.keys(TOP_LEVEL);
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('HERMES_') || value === undefined || value === '') continue;
    const top = topLevel.findIndex((key) => `HERMES_${key}`.toUpperCase() === name);
    if (top >= 0) {
      found.push({ order: top, override: [[topLevel[top]!], value, name] });
      continue;
    }
    SECTION_NAMES.forEach((section, s) => {
      if (!name.startsWith(`HERMES_${section}_`.toUpperCase())) return;
      const inner = unwrapObject(sectionSchema(section));
      const keys = inner ? Object.keys(inner.shape) : [];
      const k = keys.findIndex((key) => `HERMES_${section}_${key}`.toUpperCase() === name);
      if (k >= 0) found.push({ order: (s + 1) * 10_000 + k, override: [[section, keys[k]!], value, name] });
    });
  }
  const out = found.sort((a, b) => a.order - b.order).map((f) => f.override);
  for (const [name, path] of Object.entries(NAMED_ENV)) {
    const value = env[name];
    if (value !== undefined && value !== '') out.push([path, value, name]);
  }
  return out;
}

function unwrapObject(schema: z.ZodMiniType): z.ZodMiniObject | undefined {
  let s: unknown = schema;
  for (let i = 0; i < 5 && s; i++) {
    if (s instanceof z.ZodMiniObject) return s;
    const def = (s as { _zod?: { def?: { innerType?: unknown; in?: unknown } } })._zod?.def;
    s = def?.innerType ?? def?.in;
  }
  return undefined;
}

/**
 * Load and validate the configuration.
 *
 * @param options.env - environment to read (default `process.env`)
 * @param options.overrides - programmatic values applied last (tests, the demo, command-line flags)
 * @param options.overridesFrom - what an error calls the overrides' source (a flag); default `override`
 * @throws ConfigError naming the first bad key (file path or environment variable), or a home or
 *   `config.yaml` this user does not own or others may write (`assertTrustedHome`)
 */
export function loadConfig(
  options: { env?: NodeJS.ProcessEnv; overrides?: Record<string, unknown>; overridesFrom?: string } = {},
): HermesConfig {
  const env = options.env ?? process.env;
  const home = resolveHome(env);
  assertTrustedHome(home);
  const file = join(home, 'config.yaml');
  let raw: Record<string, unknown> = {};
  if (existsSync(file)) {
    try {
      const parsed: unknown = parseYaml(readFileSync(file, 'utf8'));
      if (parsed !== null && parsed !== undefined) {
        if (typeof parsed !== 'object' || Array.isArray(parsed)) {
          throw new ConfigError(`${file} must hold a mapping of settings`);
        }
        raw = parsed as Record<string, unknown>;
      }
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      throw new ConfigError(`${file} is not valid YAML: ${(err as Error).message}`, { cause: err });
    }
  }
  const sources = new Map<string, string>();
  for (const [path, value, name] of envOverrides(env)) {
    setPath(raw, path, value);
    sources.set(path.join('.'), name);
  }
  for (const [key, value] of Object.entries(options.overrides ?? {})) {
    setPath(raw, key.split('.'), value);
    sources.set(key, options.overridesFrom ?? 'override');
  }
  // The top-level settings and the sections given (in the file, the environment or the overrides) are
  // validated now, with the schema's own rules; every other section is its defaults (`withSectionDefaults`).
  const given = SECTION_NAMES.filter((name) => Object.hasOwn(raw, name));
  const schema = z.strictObject({ ...TOP_LEVEL, ...Object.fromEntries(given.map((name) => [name, sectionSchema(name)])) });
  const result = schema.safeParse(raw, ONCE);
  if (!result.success) throw settingError(result.error.issues[0]!, raw, sources, file);
  const values = withSectionDefaults(result.data, given);
  // Only a given `worker.shards` can break the rule (its default is none).
  if (given.includes('worker') && !SHARDS_RULE.holds(values)) {
    throw settingError({ code: 'custom', path: SHARDS_RULE.path, message: SHARDS_RULE.message, input: raw }, raw, sources, file);
  }
  if (given.includes('hooks')) resolveHookSecrets(values.hooks, env, file);
  return Object.assign(values, { home });
}

/** The `ConfigError` of the first issue of a parse: the setting's key, where it came from, and what is wrong. */
function settingError(issue: z.core.$ZodIssue, raw: Record<string, unknown>, sources: Map<string, string>, file: string): ConfigError {
  const extra = issue.code === 'unrecognized_keys' ? [issue.keys[0] ?? ''] : [];
  const key = [...issue.path.map(String), ...extra].join('.');
  const from = sources.get(key) ?? sources.get(issue.path.slice(0, -1).map(String).join('.')) ?? file;
  return new ConfigError(`Invalid setting ${key} (from ${from}): ${issueMessage(issue, valueAt(raw, issue.path))}`, { key });
}

/**
 * Put each hook's secret into its `secret`: read from `secret_env` or `secret_file` when it names one
 * (once, at load; the value is never in a message). A variable unset, a file unreadable or a secret
 * under 16 characters leaves `secret` unset and says why in `secret_problem`: the gateway refuses to
 * start on it (gateway/http/hook-routes.ts), while the CLI and the workers, which check no signature,
 * run in a shell that does not hold the gateway's secrets.
 */
function resolveHookSecrets(hooks: ConfigValues['hooks'], env: NodeJS.ProcessEnv, file: string): void {
  for (const [name, hook] of Object.entries(hooks)) {
    if (hook.secret !== undefined) continue;
    const key = `hooks.${name}.${hook.secret_env !== undefined ? 'secret_env' : 'secret_file'}`;
    let secret: string | undefined;
    let problem: string | undefined;
    if (hook.secret_env !== undefined) {
      secret = env[hook.secret_env]?.trim();
      if (!secret) problem = `${hook.secret_env} is not set`;
    } else if (hook.secret_file !== undefined) {
      try {
        secret = readFileSync(hook.secret_file, 'utf8').trim();
      } catch (err) {
        problem = `${hook.secret_file} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
      }
    }
    if (problem === undefined && (secret === undefined || secret.length < 16)) problem = 'the secret must be at least 16 characters';
    if (problem !== undefined) hook.secret_problem = `Invalid setting ${key} (from ${file}): ${problem}.`;
    else hook.secret = secret;
  }
}
