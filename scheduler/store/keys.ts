/**
 * Every Redis key, BullMQ queue name, job scheduler id and stream name of the
 * product is spelled here and nowhere else.
 *
 * All keys start with one hash-tagged prefix (default `{hermes}`), so every key
 * hashes to the same Redis Cluster slot and multi-key Lua scripts and BullMQ's
 * own scripts work on a cluster (docs/DESIGN.md §2).
 *
 * Layout rule: a key is `<prefix>:<fixed words>:<id>:<fixed words>`, and every
 * id (session id, cron job id, occurrence id, run id, bot id, …) is written
 * through `keyPart`, which percent-encodes `%`, `:`, `{`, `}`, `|`, whitespace
 * and control characters. An encoded id never contains `:`, so a key splits
 * into its segments in exactly one way: no id can reach another id's key
 * (session `y:inflight` cannot address the in-flight mark of session `y`, and
 * `x:mutation` cannot address `x`'s mutation lock). Ids made only of letters,
 * digits and `_ . @ -` are written unchanged, so keys of such ids are the same
 * as before this rule. Job scheduler ids and custom BullMQ job ids follow the
 * same rule.
 */
import type { LoopKind } from '../tick/tick-kind.ts';

/** BullMQ queue names. A queue's Redis keys are `<prefix>:<queue>:…`. */
export const QUEUES = {
  /** Scheduled wakeups: loop and heartbeat ticks, cron occurrences (job schedulers live here). */
  ticks: 'ticks',
  /** Session input: user messages, slash commands, goal continuations. */
  inbox: 'inbox',
  /** Replies to send to Telegram, consumed by the gateway (one job per reply; each part sent at least once). */
  outboundTelegram: 'outbound-telegram',
  /** Replies to send to Slack (`chat.postMessage`), consumed by the gateway like `outbound-telegram`. */
  outboundSlack: 'outbound-slack',
  /** Replies to send to Discord (REST `POST /channels/{id}/messages`), consumed by the gateway like `outbound-telegram`. */
  outboundDiscord: 'outbound-discord',
  /** OpenAI-compatible `/v1` requests, run by workers; the gateway waits for the result. */
  v1Runs: 'v1-runs',
} as const;

/**
 * The run id `hermes up` stores in its embedded Redis (and in `$HERMES_HOME/redis/redis.run`);
 * every connection to the embedded server compares the two (`store/redis/embedded-identity.ts`).
 * Outside the product's prefix: it belongs to the server, not to a key space, and no other Redis has it.
 */
export const EMBEDDED_RUN_ID_KEY = 'hermes-embedded:run-id';

const KEY_PART_UNSAFE = /[%:{}|\s\p{Cc}]/gu;

/**
 * An id as one segment of a key, job scheduler id or job id: `%`, `:`, `{`,
 * `}`, `|`, whitespace and control characters become `%XX` (UTF-8 bytes, upper
 * case hex); everything else, unicode included, is kept. Injective: distinct
 * ids always give distinct parts, and a part never contains `:`, `{`, `}` or `|`.
 */
export function keyPart(id: string | number): string {
  return String(id).replace(KEY_PART_UNSAFE, encodeUnsafe);
}

/**
 * `keyPart`'s `%XX` form of each character it encodes, made once per character: most ids have some (the `:` of a
 * session or occurrence id), and every key of an occurrence is built anew. Bounded: only `KEY_PART_UNSAFE`'s characters.
 */
const ENCODED_UNSAFE = new Map<string, string>();

function encodeUnsafe(c: string): string {
  let encoded = ENCODED_UNSAFE.get(c);
  if (encoded === undefined) {
    encoded = Array.from(new TextEncoder().encode(c), (b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
    ENCODED_UNSAFE.set(c, encoded);
  }
  return encoded;
}

/** The id a `keyPart` was made from. */
export function fromKeyPart(part: string): string {
  return decodeURIComponent(part);
}

/**
 * A composite id (occurrence ids) from parts: each part through `keyPart`,
 * joined with `:`. Distinct part lists always give distinct ids.
 */
export function compositeId(...parts: Array<string | number>): string {
  return parts.map(keyPart).join(':');
}

/** The cron job id a job scheduler id `cron:<id>` names (`Keys.cronSchedulerId`), or `undefined` for another scheduler's. */
export function parseCronSchedulerId(id: string): string | undefined {
  if (!id.startsWith('cron:') || id.length === 'cron:'.length) return undefined;
  try {
    return fromKeyPart(id.slice('cron:'.length));
  } catch {
    return undefined;
  }
}

/**
 * The kind and session of a loop or heartbeat job scheduler id
 * (`Keys.loopSchedulerId`: `<kind>:<keyPart(session)>`), or `undefined` for any
 * other id (a cron job's scheduler, a malformed id).
 */
export function parseLoopSchedulerId(id: string): { kind: LoopKind; sessionId: string } | undefined {
  const i = id.indexOf(':');
  const kind = id.slice(0, i);
  if (i < 0 || (kind !== 'loop' && kind !== 'heartbeat')) return undefined;
  const part = id.slice(i + 1);
  if (part === '' || part.includes(':')) return undefined;
  try {
    return { kind, sessionId: fromKeyPart(part) };
  } catch {
    return undefined;
  }
}

/**
 * A custom BullMQ job id from parts. BullMQ rejects custom ids that contain
 * `:` (unless they have exactly three parts, its own scheduler format), so
 * parts are joined with `|` and `%`/`:`/`|` inside a part are percent-encoded.
 * Distinct parts always give distinct ids.
 */
export function bullJobId(...parts: Array<string | number>): string {
  return parts.map(keyPart).join('|');
}

/**
 * The shard of an id among `shardCount` shards: FNV-1a (32 bit) over the id's
 * UTF-8 bytes, modulo the count. Stable across processes, versions and
 * platforms; changing it would move every session, so it never changes.
 */
export function shardOf(id: string, shardCount: number): number {
  if (shardCount <= 1) return 0;
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(id)) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % shardCount;
}

/**
 * Key builder bound to one shard of the key space.
 *
 * Shards (`redis.shards`, docs/DESIGN.md §2): with one shard every key starts with the
 * configured prefix (`{hermes}`), as it always did. With N > 1 shard `i`'s
 * keys start with `{hermes:i}`, so the shards hash to different cluster slots
 * and spread over a cluster's masters. A session lives wholly on the shard
 * `shardOf(sessionId)`, a cron job on the shard of its session `cron:<id>`:
 * its record, locks, transcript, events, occurrence markers and its BullMQ
 * `ticks` and `inbox` queues, so every multi-key script stays in one slot.
 *
 * Routing: the methods that take a session id (or a cron job id) always answer
 * with the key on that session's shard, whatever shard this builder is bound
 * to. Everything else — indexes (`scheduleIndex`, `sessionIndex`, …),
 * `/v1` runs, outbound evidence and
 * `bullPrefix` — is on this builder's own shard: take `forSession(id)` /
 * `forCronJob(id)` first when they go into a script with a session's keys.
 * The first shard (`shard(0)`, the builder `new Keys(prefix, …)` returns) also
 * holds what belongs to no session: `/v1` runs and the Telegram outbound queue.
 * Fleet-wide keys (`workers`, Telegram poll lease and offset, the shard count
 * marker) use the plain prefix.
 */
export class Keys {
  /** The prefix of this builder's shard: `{hermes}` with one shard, else `{hermes:<shardIndex>}`. */
  readonly prefix: string;
  /** Number of shards of the key space (`redis.shards`). */
  readonly shardCount: number;
  /** This builder's shard, 0 … shardCount-1. */
  readonly shardIndex: number;
  /** The configured prefix (`redis.prefix`): fleet-wide keys use it. */
  readonly basePrefix: string;
  private readonly family: Keys[];

  /**
   * @param prefix - hash-tagged prefix, e.g. `{hermes}` (`redis.prefix`)
   * @param options.shards - shards of the key space (`redis.shards`), default 1
   * @throws Error when the prefix is not a hash tag or the count is not a positive integer
   */
  constructor(prefix: string, options: { shards?: number } = {}, internal?: { index: number; family: Keys[] }) {
    if (!/^\{[^{}]+\}$/.test(prefix)) throw new Error(`key prefix must be a hash tag like {hermes}, got ${prefix}`);
    const count = options.shards ?? 1;
    if (!Number.isInteger(count) || count < 1) throw new Error(`shard count must be a positive integer, got ${count}`);
    this.basePrefix = prefix;
    this.shardCount = count;
    this.shardIndex = internal?.index ?? 0;
    this.prefix = count === 1 ? prefix : `{${prefix.slice(1, -1)}:${this.shardIndex}}`;
    this.family = internal?.family ?? [];
    if (!internal) {
      this.family.push(this);
      for (let i = 1; i < count; i++) this.family.push(new Keys(prefix, options, { index: i, family: this.family }));
    }
  }

  /** The builder of shard `index`. @throws RangeError outside 0 … shardCount-1 */
  shard(index: number): Keys {
    const k = this.family[index];
    if (!k) throw new RangeError(`no shard ${index}: the key space has ${this.shardCount} shard(s)`);
    return k;
  }

  /** Every shard's builder, in shard order. */
  shards(): readonly Keys[] {
    return this.family;
  }

  /** The shard a session lives on. */
  shardOfSession(sessionId: string): number {
    return shardOf(sessionId, this.shardCount);
  }

  /** The shard a cron job lives on: the shard of its session `cron:<id>` (`cronSessionId`). */
  shardOfCronJob(jobId: string): number {
    return shardOf(`cron:${jobId}`, this.shardCount);
  }

  /** The builder of a session's shard. */
  forSession(sessionId: string): Keys {
    return this.family[this.shardOfSession(sessionId)]!;
  }

  /** The builder of a cron job's shard. */
  forCronJob(jobId: string): Keys {
    return this.family[this.shardOfCronJob(jobId)]!;
  }

  private sp(sessionId: string): string {
    return this.forSession(sessionId).prefix;
  }

  private cp(jobId: string): string {
    return this.forCronJob(jobId).prefix;
  }

  /** Marker holding the shard count the store was written with (fleet-wide). */
  get shardCountMarker(): string {
    return `${this.basePrefix}:shard-count`;
  }

  /** Marker of a reshard under way: the shard count it moves the store to (fleet-wide). */
  get reshardTarget(): string {
    return `${this.basePrefix}:reshard-to`;
  }

  /**
   * The keys of a session that move with it when the shard count changes:
   * loop and heartbeat records with their in-flight marks and watch bases, goal, transcript,
   * event stream, pending input and its sequence, committed occurrences, set-aside input.
   * (Mutation and turn locks and turn journals are short-lived and not moved.)
   */
  sessionKeys(sessionId: string): string[] {
    const kinds: LoopKind[] = ['loop', 'heartbeat'];
    return [
      ...kinds.flatMap((k) => [this.schedule(sessionId, k), this.scheduleInflight(sessionId, k), this.scheduleWatchBase(sessionId, k)]),
      this.goal(sessionId),
      this.transcript(sessionId),
      this.events(sessionId),
      this.pendingInput(sessionId),
      this.inputSequence(sessionId),
      this.sessionCommitted(sessionId),
      this.agentSchedulesCreated(sessionId),
      this.setAsideInput(sessionId),
    ];
  }

  /**
   * The keys of a cron job that move with it when the shard count changes: record, runs, run index, claims,
   * committed occurrences, watch base, overlap buffer, the jobs that run after it.
   */
  cronJobKeys(id: string): string[] {
    return [
      this.cronJob(id),
      this.cronRuns(id),
      this.cronRunIndex(id),
      this.cronClaims(id),
      this.cronCommitted(id),
      this.cronWatchBase(id),
      this.cronBuffer(id),
      this.cronChildren(id),
      this.cronAfterAll(id),
    ];
  }

  /**
   * This shard's list orders (`lex-index.ts`) and the mark that its session order is complete: dropped
   * after a reshard, each is made again from its index at the next list.
   */
  get listOrders(): string[] {
    return [
      this.scheduleOrder,
      this.sessionOrder,
      this.sessionOrderBuilt,
      this.goalOrder,
      this.cronJobOrder,
      this.setAsideSessions,
      this.setAsideSessionsBuilt,
    ];
  }

  /**
   * The product's indexes under the one-shard layout, for telling whether a
   * store written with one shard has data (fleet-wide prefix).
   */
  get unshardedIndexes(): string[] {
    const p = this.basePrefix;
    return [`${p}:schedules`, `${p}:goals`, `${p}:sessions`, `${p}:cron:jobs`];
  }

  /** Prefix handed to BullMQ (`prefix` option of Queue/Worker). */
  get bullPrefix(): string {
    return this.prefix;
  }

  /** JSON state of a session's loop or heartbeat. */
  schedule(sessionId: string, kind: LoopKind): string {
    return `${this.sp(sessionId)}:schedule:${kind}:${keyPart(sessionId)}`;
  }

  /** Short lock held while one process changes a session's schedule (record + job scheduler). */
  scheduleMutation(sessionId: string, kind: LoopKind): string {
    return `${this.sp(sessionId)}:schedule:${kind}:${keyPart(sessionId)}:mutation`;
  }

  /** The occurrence of a schedule whose turn has started but not committed (JSON). */
  scheduleInflight(sessionId: string, kind: LoopKind): string {
    return `${this.sp(sessionId)}:schedule:${kind}:${keyPart(sessionId)}:inflight`;
  }

  /**
   * What a loop's or heartbeat's `--watch` saw at its last kept tick (hash: owner, spec, digest,
   * size, content up to `tools.watch_diff_max_bytes`): what the next change is told against.
   */
  scheduleWatchBase(sessionId: string, kind: LoopKind): string {
    return `${this.sp(sessionId)}:schedule:${kind}:${keyPart(sessionId)}:watch`;
  }

  /** Set of `scheduleIndexMember`s of every stored loop/heartbeat (for status and listing). */
  get scheduleIndex(): string {
    return `${this.prefix}:schedules`;
  }

  /**
   * The loops and heartbeats of this shard in list order (`store/lex-index.ts`): a sorted set, every score 0,
   * of `scheduleOrderMember`s, written in the same script as the record and `scheduleIndex`.
   */
  get scheduleOrder(): string {
    return `${this.prefix}:schedules:by-session`;
  }

  /** Member of `scheduleOrder`: `<sessionId>\0<kind>` (a session id holds no NUL), so a session's two sort together. */
  scheduleOrderMember(sessionId: string, kind: LoopKind): string {
    return `${sessionId}\0${kind}`;
  }

  /** The session and kind of a `scheduleOrder` member. */
  parseScheduleOrderMember(member: string): { sessionId: string; kind: LoopKind } {
    const at = member.lastIndexOf('\0');
    return { sessionId: member.slice(0, at), kind: member.slice(at + 1) as LoopKind };
  }

  /** Member of `scheduleIndex` for a session's loop or heartbeat: `<kind>:<sessionId>` (the kind never holds `:`). */
  scheduleIndexMember(sessionId: string, kind: LoopKind): string {
    return `${kind}:${sessionId}`;
  }

  /** The session and kind of a `scheduleIndex` member (split at the first `:`, after the kind). */
  parseScheduleIndexMember(member: string): { sessionId: string; kind: LoopKind } {
    const i = member.indexOf(':');
    return { kind: member.slice(0, i) as LoopKind, sessionId: member.slice(i + 1) };
  }

  /** BullMQ job scheduler id of a session's loop or heartbeat. */
  loopSchedulerId(sessionId: string, kind: LoopKind): string {
    return `${kind}:${keyPart(sessionId)}`;
  }

  /** JSON state of a session's standing goal. */
  goal(sessionId: string): string {
    return `${this.sp(sessionId)}:goal:${keyPart(sessionId)}`;
  }

  /** Set of session ids that have a goal record. */
  get goalIndex(): string {
    return `${this.prefix}:goals`;
  }

  /**
   * The sessions of this shard that have input set aside: a sorted set of session ids by the time of their newest
   * entry (`scheduler/session/set-aside.ts`), so `hermes status` reads the newest few, not every session.
   */
  get setAsideSessions(): string {
    return `${this.prefix}:sessions:set-aside`;
  }

  /** Set once `setAsideSessions` holds every session of this shard with input set aside before it existed. */
  get setAsideSessionsBuilt(): string {
    return `${this.prefix}:sessions:set-aside:built`;
  }

  /** The goals of this shard in list order (`lex-index.ts`): their session ids, a sorted set of score 0. */
  get goalOrder(): string {
    return `${this.prefix}:goals:by-session`;
  }

  /** Session transcript: a list of JSON messages, oldest first. */
  transcript(sessionId: string): string {
    return `${this.sp(sessionId)}:session:${keyPart(sessionId)}:transcript`;
  }

  /** Session event stream (Redis stream) that clients attach to. */
  events(sessionId: string): string {
    return `${this.sp(sessionId)}:session:${keyPart(sessionId)}:events`;
  }

  /** One turn per session across the fleet: holds the id of the job running the turn. */
  turnLock(sessionId: string): string {
    return `${this.sp(sessionId)}:session:${keyPart(sessionId)}:turn-lock`;
  }

  /**
   * The journal of one occurrence's agent turn (`scheduler/journal/`): a list of JSON steps — each
   * model answer, each tool call started, each tool result — read by the worker that resumes the
   * turn, deleted by the occurrence's commit, expiring with the occurrence window. On the session's
   * shard (a cron run's: its session `cron:<id>`), so the commit script deletes it in its own step.
   */
  turnJournal(sessionId: string, occurrenceId: string): string {
    return `${this.sp(sessionId)}:session:${keyPart(sessionId)}:journal:${keyPart(occurrenceId)}`;
  }

  /** Count of queued real user input for a session; ticks wait while it is above zero. */
  pendingInput(sessionId: string): string {
    return `${this.sp(sessionId)}:session:${keyPart(sessionId)}:pending-input`;
  }

  /**
   * A session's set-aside input (`scheduler/session/set-aside.ts`): a list of JSON entries, newest
   * first, capped and expiring (`worker.set_aside_retention_seconds`).
   */
  setAsideInput(sessionId: string): string {
    return `${this.sp(sessionId)}:session:${keyPart(sessionId)}:set-aside`;
  }

  /** Counter that orders a session's input received in the same millisecond. */
  inputSequence(sessionId: string): string {
    return `${this.sp(sessionId)}:session:${keyPart(sessionId)}:input-seq`;
  }

  /** Set of known session ids. */
  get sessionIndex(): string {
    return `${this.prefix}:sessions`;
  }

  /**
   * The sessions of this shard in list order (`store/lex-index.ts`): a sorted set, every score 0, of the ids
   * of sessions that were sent input or have a loop, heartbeat or goal; added in the scripts that write those.
   */
  get sessionOrder(): string {
    return `${this.prefix}:sessions:by-id`;
  }

  /** Set while `sessionOrder` holds every session of this shard (made once from the older indexes, `gateway/session-index.ts`). */
  get sessionOrderBuilt(): string {
    return `${this.prefix}:sessions:by-id:built`;
  }

  /**
   * Occurrences (ticks, messages, goal turns) of a session committed recently:
   * a sorted set of occurrence id → commit time (ms), trimmed to a window.
   */
  sessionCommitted(sessionId: string): string {
    return `${this.sp(sessionId)}:session:${keyPart(sessionId)}:committed`;
  }

  /**
   * Schedules the agent created in a session (`schedules` tool): a sorted set of schedule id →
   * creation time (ms), trimmed to the last 24 hours (`tools.schedules.max_created_per_day`).
   */
  agentSchedulesCreated(sessionId: string): string {
    return `${this.sp(sessionId)}:session:${keyPart(sessionId)}:agent-schedules`;
  }

  /**
   * Schedules MCP clients created (`hermes mcp`, `/mcp`), fleet-wide: a sorted set of schedule id →
   * creation time (ms), trimmed to the last 24 hours (`mcp.max_created_per_day`).
   */
  get mcpSchedulesCreated(): string {
    return `${this.basePrefix}:mcp:schedules-created`;
  }

  /**
   * A webhook delivery taken by hook `hook` (`POST /hooks/<name>`), fleet-wide: set once (`SET NX`)
   * with `hooks.<name>.replay_window_seconds` to live, holding what the delivery started; the same
   * delivery id again within it is a replay.
   */
  hookDelivery(hook: string, deliveryId: string): string {
    return `${this.basePrefix}:hook:${keyPart(hook)}:delivery:${keyPart(deliveryId)}`;
  }

  /**
   * The last delivery hook `hook` took (`scheduler/hooks/hook-deliveries.ts`), fleet-wide: its time, id,
   * event and what it started, for `hermes status`. Kept until the next one replaces it.
   */
  hookLastDelivery(hook: string): string {
    return `${this.basePrefix}:hook:${keyPart(hook)}:last`;
  }

  /** Sorted set of live worker processes, scored by last heartbeat (ms). */
  get workers(): string {
    return `${this.basePrefix}:workers`;
  }

  /**
   * The context window learned for `model` at `endpoint` (versioned JSON; fleet-wide, so every
   * worker uses it and it outlives restarts: docs/CONTEXT.md "Refusals").
   */
  modelWindow(endpoint: string, model: string): string {
    return `${this.basePrefix}:model:${keyPart(endpoint)}:${keyPart(model)}:window`;
  }

  /** The circuit breaker of `model` at `endpoint` (versioned JSON; fleet-wide: docs/CONTEXT.md "Circuit breaker"). */
  modelBreaker(endpoint: string, model: string): string {
    return `${this.basePrefix}:model:${keyPart(endpoint)}:${keyPart(model)}:breaker`;
  }

  /** Set of `modelIndexMember`s of every endpoint and model with a learned window or a breaker (fleet-wide). */
  get modelIndex(): string {
    return `${this.basePrefix}:models`;
  }

  /** Member of `modelIndex`: `<keyPart(endpoint)> <keyPart(model)>` (an encoded id holds no space). */
  modelIndexMember(endpoint: string, model: string): string {
    return `${keyPart(endpoint)} ${keyPart(model)}`;
  }

  /** The endpoint and model of a `modelIndex` member. */
  parseModelIndexMember(member: string): { endpoint: string; model: string } {
    const i = member.indexOf(' ');
    return { endpoint: fromKeyPart(member.slice(0, i)), model: fromKeyPart(member.slice(i + 1)) };
  }

  /** Sorted set of running gateway instances, scored by their last heartbeat (ms): whose platform states are current. */
  get gateways(): string {
    return `${this.basePrefix}:gateways`;
  }

  /**
   * Hash of one gateway instance's platforms: platform name → its state as published
   * (`scheduler/delivery/platform-state.ts`), expiring unless the gateway's heartbeat renews it.
   */
  gatewayPlatforms(instanceId: string): string {
    return `${this.basePrefix}:gateway:${keyPart(instanceId)}:platforms`;
  }

  /** A short-lived string the gateway's readiness check writes: whether Redis takes writes (gateway/health.ts). */
  get healthProbe(): string {
    return `${this.basePrefix}:health-probe`;
  }

  /** Pub/sub channel: a message (a session id) asks every worker to abort that session's running turn (`/stop`). */
  get turnAbortChannel(): string {
    return `${this.basePrefix}:turn-abort`;
  }

  /** JSON record of a cron job (docs/DESIGN.md §7). */
  cronJob(id: string): string {
    return `${this.cp(id)}:cron:job:${keyPart(id)}`;
  }

  /** Set of every cron job id. */
  get cronJobIndex(): string {
    return `${this.prefix}:cron:jobs`;
  }

  /**
   * The cron jobs of this shard in list order (`store/lex-index.ts`): a sorted set, every score 0, of
   * `<folded name>\0<id>` (`cron/cron-order.ts`), written in the scripts that write or delete a record.
   */
  get cronJobOrder(): string {
    return `${this.prefix}:cron:jobs:by-name`;
  }

  /** Hash of a cron job's run records: occurrence id → run JSON. */
  cronRuns(id: string): string {
    return `${this.cp(id)}:cron:job:${keyPart(id)}:runs`;
  }

  /** List of a cron job's occurrence ids, newest first (capped with the run hash). */
  cronRunIndex(id: string): string {
    return `${this.cp(id)}:cron:job:${keyPart(id)}:run-index`;
  }

  /** List of `cronRecentRunEntry`s of recent runs of all cron jobs, newest first (capped). */
  get cronRecentRuns(): string {
    return `${this.prefix}:cron:recent-runs`;
  }

  /** Entry of `cronRecentRuns`: `<keyPart(jobId)> <occurrenceId>` (an encoded id holds no space). */
  cronRecentRunEntry(jobId: string, occurrenceId: string): string {
    return `${keyPart(jobId)} ${occurrenceId}`;
  }

  /** The job id and occurrence id of a `cronRecentRuns` entry. */
  parseCronRecentRunEntry(entry: string): { jobId: string; occurrenceId: string } {
    const i = entry.indexOf(' ');
    return { jobId: fromKeyPart(entry.slice(0, i)), occurrenceId: entry.slice(i + 1) };
  }

  /** BullMQ job scheduler id of a recurring cron job. */
  cronSchedulerId(id: string): string {
    return `cron:${keyPart(id)}`;
  }

  /** BullMQ job id of a one-shot cron job's single occurrence (`atMs` epoch ms). */
  cronOnceJobId(id: string, atMs: number): string {
    return `cron-once:${keyPart(id)}:${atMs}`;
  }

  /**
   * BullMQ job id of a recurring job's first occurrence when it had already passed by the time the
   * job scheduler was written (the scheduler then starts at the occurrence after it).
   */
  cronPassedFirstJobId(id: string, atMs: number): string {
    return `cron-first:${keyPart(id)}:${atMs}`;
  }

  /**
   * BullMQ job id of the run of a job after a parent's run (`--after`), `parentDigest` naming that run
   * (`afterRunDigest`): a retried hand-off adds the same id, which BullMQ keeps once.
   */
  cronAfterJobId(id: string, parentDigest: string): string {
    return `cron-after:${keyPart(id)}:${keyPart(parentDigest)}`;
  }

  /**
   * Set of the ids of the jobs that run after a cron job (`--after`), on that job's shard: the candidates its runs
   * hand off to (each child's record decides; a member whose record no longer names the job is passed over).
   */
  cronChildren(id: string): string {
    return `${this.cp(id)}:cron:job:${keyPart(id)}:children`;
  }

  /**
   * Hash of the window of a job that waits for all its parents (`--after-all`), on that job's shard:
   * `run:<parent id>` → the parent's latest run in the window, waiting; `done:<parent id>` → the last run of that
   * parent a run of the job took (a retried hand-off of it adds nothing). Written by the parents' hand-offs.
   */
  cronAfterAll(id: string): string {
    return `${this.cp(id)}:cron:job:${keyPart(id)}:after-all`;
  }

  /** BullMQ job id of a manual run (`hermes cron run`, `resume --run-now`) requested at `atMs`. */
  cronManualJobId(id: string, atMs: number): string {
    return `cron-manual:${keyPart(id)}:${atMs}`;
  }

  /** BullMQ job id of a backfilled occurrence of a cron job (`hermes cron backfill`), due at `atMs`. */
  cronBackfillJobId(id: string, atMs: number): string {
    return `${this.cronBackfillJobIdPrefix(id)}${atMs}`;
  }

  /** BullMQ job id of a missed occurrence of a cron job queued by `--misfire all` after an outage, due at `atMs`. */
  cronCatchUpJobId(id: string, atMs: number): string {
    return `cron-catchup:${keyPart(id)}:${atMs}`;
  }

  /** What the BullMQ job id of every backfilled occurrence of a cron job starts with. */
  cronBackfillJobIdPrefix(id: string): string {
    return `cron-backfill:${keyPart(id)}:`;
  }

  /** Hash of a cron job's claimed, uncommitted occurrences: occurrence id → holder, attempt, claim time. */
  cronClaims(id: string): string {
    return `${this.cp(id)}:cron:job:${keyPart(id)}:claims`;
  }

  /** A cron job's recently committed occurrences: sorted set of occurrence id → commit time (ms), trimmed to a window. */
  cronCommitted(id: string): string {
    return `${this.cp(id)}:cron:job:${keyPart(id)}:committed`;
  }

  /**
   * Occurrences of a cron job with `--overlap buffer_all` waiting behind its running one: sorted set of
   * `<generation> <trigger> <occurrence id>` → due time (ms), run in that order.
   */
  cronBuffer(id: string): string {
    return `${this.cp(id)}:cron:job:${keyPart(id)}:buffer`;
  }

  /** What a cron job's `--watch` saw at its last kept run (as `scheduleWatchBase`). */
  cronWatchBase(id: string): string {
    return `${this.cp(id)}:cron:job:${keyPart(id)}:watch`;
  }

  /** Hash of one `/v1` run: status, output, error, timestamps. */
  run(runId: string): string {
    return `${this.prefix}:run:${keyPart(runId)}`;
  }

  /** Event stream of one `/v1` run (queued, started, then one terminal event). */
  runEvents(runId: string): string {
    return `${this.prefix}:run:${keyPart(runId)}:events`;
  }

  /** `Idempotency-Key` of a `/v1` request (by its SHA-256) → run id and payload digest. */
  runIdempotency(keyDigest: string): string {
    return `${this.prefix}:run-idempotency:${keyPart(keyDigest)}`;
  }

  /** Sorted set of `/v1` run ids by creation time (ms), trimmed to `gateway.run_ttl_seconds` (`GET /v1/runs`). */
  get runIndex(): string {
    return `${this.prefix}:run-index`;
  }

  /** Wake stream of one gateway instance's shared stream reader (a new subscription interrupts its blocking read). */
  gatewayWake(instanceId: string): string {
    return `${this.prefix}:gateway:${keyPart(instanceId)}:wake`;
  }

  /** The one-poller-per-bot lease: holds the id of the gateway instance polling `botId`. */
  telegramPollLease(botId: string): string {
    return `${this.basePrefix}:telegram:${keyPart(botId)}:poll-lease`;
  }

  /** Next getUpdates offset of `botId` whose updates are already stored (all below it are in the inbox). */
  telegramOffset(botId: string): string {
    return `${this.basePrefix}:telegram:${keyPart(botId)}:offset`;
  }

  /** The one-connection-per-bot lease of Discord: holds the id of the gateway instance connected as `botId`. */
  discordGatewayLease(botId: string): string {
    return `${this.basePrefix}:discord:${keyPart(botId)}:gateway-lease`;
  }

  /**
   * The resumable Discord gateway session of `botId` (JSON: session id, resume URL, and the
   * sequence of the last event stored), so the next holder of the lease resumes it.
   */
  discordGatewaySession(botId: string): string {
    return `${this.basePrefix}:discord:${keyPart(botId)}:gateway-session`;
  }

  /**
   * Mark of a refusal sent to `userId` in `chatId` by `platform`'s bot `botId` (fleet-wide, like the
   * poll lease; gateway/outbound/refusals.ts).
   */
  refusalMark(platform: string, botId: string, chatId: string, userId: string): string {
    return `${this.basePrefix}:${keyPart(platform)}:${keyPart(botId)}:refused:${keyPart(chatId)}:${keyPart(userId)}`;
  }

  /**
   * Send record of an outbound reply: part index → platform message id (or `sending`
   * while unconfirmed), and `seq`, the reply's place in its chat's queue order.
   */
  outboundSent(occurrenceId: string): string {
    return `${this.prefix}:outbound:${keyPart(occurrenceId)}:sent`;
  }

  /** Sorted set of a chat's outbound replies not yet finished (occurrence id scored by queue order). */
  outboundOrder(platform: string, chatId: string): string {
    return `${this.prefix}:outbound-order:${keyPart(platform)}:${keyPart(chatId)}`;
  }

  /** Counter that numbers outbound replies in the order they were queued (all chats). */
  get outboundSequence(): string {
    return `${this.prefix}:outbound-seq`;
  }
}
