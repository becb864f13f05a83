/**
 * The product's Prometheus metrics (prom-client), one registry per process
 * (a worker and a gateway may share a process in `hermes up` and in tests, so
 * nothing goes to prom-client's global registry). Names, labels and units are
 * documented with alert rules in docs/OPERATIONS.md.
 *
 * Counters and histograms are recorded where things happen (worker: ticks,
 * turns, deferrals; gateway: HTTP requests, Telegram sends). Gauges of shared
 * state (`hermes_queue_jobs`, `hermes_workers_alive`) are read from Redis when
 * scraped, so every process reports the same fleet-wide value.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { TickKind } from './tick/tick-kind.ts';
import { countAliveWorkers } from './worker-liveness.ts';
import { breakerState, type BreakerRecord } from './models/circuit-breaker.ts';

/** Kinds of turns: scheduled ones and those started by input. */
export type TurnKind = TickKind | 'message' | 'goal' | 'v1';
/** How a turn ended (the `outcome` label of `hermes_turns_total`): `aborted` is a drain or `/stop`. */
export const TURN_OUTCOMES = ['ok', 'failed', 'aborted'] as const;
export type TurnOutcome = (typeof TURN_OUTCOMES)[number];

/** Reads of shared state for the scrape-time gauges. */
export interface FleetReadings {
  /** Job counts by queue name and BullMQ state (`waiting`, `active`, `delayed`, `failed`, …). */
  queueJobs(): Promise<Record<string, Record<string, number>>>;
  /** Worker processes whose liveness heartbeat is fresh. */
  workersAlive(): Promise<number>;
  /** Circuit breakers of endpoints and models that are open (or probing) now. */
  breakersOpen?(): Promise<number>;
}

/**
 * How a model call ended (the `outcome` label of `hermes_model_calls_total`): `ok`; `fallback` —
 * answered by one of `agent.fallback_models`; `failed` for good (after retries and fallbacks);
 * `retried` counts each transient answer (429, 5xx, connection error) the client then retried;
 * `skipped` each model a call went past because its circuit breaker was open.
 */
export const MODEL_CALL_OUTCOMES = ['ok', 'fallback', 'failed', 'retried', 'skipped'] as const;
/**
 * What a refusal for length taught (the `learned` label of `hermes_model_context_refusals_total`):
 * the window it `stated`, a window `halved` from one that named none, or nothing (`failed`: the
 * request was already under the floor, the call failed).
 */
export const REFUSAL_LEARNED = ['stated', 'halved', 'failed'] as const;
export type RefusalLearned = (typeof REFUSAL_LEARNED)[number];
export type ModelCallOutcome = (typeof MODEL_CALL_OUTCOMES)[number];
/** The `direction` label of `hermes_model_tokens_total`: prompt, completion, and the prompt tokens served from the provider's cache. */
export type TokenDirection = 'input' | 'output' | 'cached';

/** Histogram buckets of tick lateness, seconds: on time is under 50 ms; minutes mean trouble. */
export const LATENESS_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
/** Histogram buckets of turn duration, seconds (command turns are fast, model turns take seconds). */
export const TURN_BUCKETS_SECONDS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** The metrics of one process. */
export class HermesMetrics {
  readonly registry = new Registry();
  /** Start of a tick's turn minus its due time, seconds. */
  readonly tickLateness: Histogram<'kind'>;
  readonly turns: Counter<'kind' | 'outcome'>;
  readonly turnDuration: Histogram<'kind'>;
  /** A tick handed back for later (busy session, pending input, an active goal, a drain, …). */
  readonly ticksDeferred: Counter<'reason'>;
  readonly telegramSends: Counter<'outcome'>;
  /** Sends of the platform-neutral outbound senders (Slack), by platform and outcome. */
  readonly platformSends: Counter<'platform' | 'outcome'>;
  /** 1 for each platform's current plugin state (gateway), read at scrape time. */
  readonly platformState: Gauge<'platform' | 'state'>;
  private platformStates: (() => Array<{ name: string; state: string }>) | undefined;
  readonly httpRequests: Counter<'route' | 'status'>;
  /** Model calls of agent turns, judges and summaries, by turn kind and `ModelCallOutcome`. */
  readonly modelCalls: Counter<'kind' | 'outcome'>;
  /** Tokens of model calls by turn kind and `TokenDirection` (estimated where the endpoint reported none). */
  readonly modelTokens: Counter<'kind' | 'direction'>;
  /** Refusals for length by turn kind and `RefusalLearned`. */
  readonly modelRefusals: Counter<'kind' | 'learned'>;
  /** Circuit breakers that opened, by model id. */
  readonly breakerOpens: Counter<'model'>;
  readonly breakersOpen: Gauge;
  readonly queueJobs: Gauge<'queue' | 'state'>;
  readonly workersAlive: Gauge;

  /**
   * @param options.fleet - reads for the scrape-time gauges (without it they stay empty)
   * @param options.processMetrics - Node's own process metrics (CPU, memory, event loop lag); default true
   */
  constructor(options: { fleet?: FleetReadings; processMetrics?: boolean } = {}) {
    const registers = [this.registry];
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'hermes_' });
    this.tickLateness = new Histogram({
      name: 'hermes_tick_lateness_seconds',
      help: "Start of a tick's turn minus its due time (loop, heartbeat, cron), seconds.",
      labelNames: ['kind'],
      buckets: LATENESS_BUCKETS_SECONDS,
      registers,
    });
    this.turns = new Counter({
      name: 'hermes_turns_total',
      help: 'Turns run, by kind and outcome.',
      labelNames: ['kind', 'outcome'],
      registers,
    });
    this.turnDuration = new Histogram({
      name: 'hermes_turn_duration_seconds',
      help: 'Wall time of a turn (runner call to commit), seconds.',
      labelNames: ['kind'],
      buckets: TURN_BUCKETS_SECONDS,
      registers,
    });
    this.ticksDeferred = new Counter({
      name: 'hermes_ticks_deferred_total',
      help: 'Ticks handed back to run later, by reason.',
      labelNames: ['reason'],
      registers,
    });
    this.telegramSends = new Counter({
      name: 'hermes_telegram_sends_total',
      help: 'Telegram sendMessage calls of the outbound sender, by outcome.',
      labelNames: ['outcome'],
      registers,
    });
    this.platformSends = new Counter({
      name: 'hermes_platform_sends_total',
      help: "Messages sent by a platform's outbound sender (Slack chat.postMessage), by platform and outcome.",
      labelNames: ['platform', 'outcome'],
      registers,
    });
    const states = () => this.platformStates?.() ?? [];
    this.platformState = new Gauge({
      name: 'hermes_platform_state',
      help: 'State of each platform of the gateway (ready, loading, adapter_unavailable, not_enabled, …): 1 for the current state.',
      labelNames: ['platform', 'state'],
      registers,
      collect() {
        this.reset();
        for (const p of states()) this.set({ platform: p.name, state: p.state }, 1);
      },
    });
    this.httpRequests = new Counter({
      name: 'hermes_http_requests_total',
      help: 'HTTP requests of the gateway, by route pattern and status code.',
      labelNames: ['route', 'status'],
      registers,
    });
    this.modelCalls = new Counter({
      name: 'hermes_model_calls_total',
      help: 'Model calls, by turn kind and outcome (ok, fallback, failed; retried counts transient answers the client retried).',
      labelNames: ['kind', 'outcome'],
      registers,
    });
    this.modelTokens = new Counter({
      name: 'hermes_model_tokens_total',
      help: 'Tokens of model calls, by turn kind and direction (input, output, cached input).',
      labelNames: ['kind', 'direction'],
      registers,
    });
    this.modelRefusals = new Counter({
      name: 'hermes_model_context_refusals_total',
      help: 'Requests a provider refused for length, by turn kind and what the refusal taught (stated, halved, failed).',
      labelNames: ['kind', 'learned'],
      registers,
    });
    this.breakerOpens = new Counter({
      name: 'hermes_model_breaker_opens_total',
      help: "Circuit breakers that opened (a model's calls failed in a row; calls go to the fallback models), by model.",
      labelNames: ['model'],
      registers,
    });
    const fleet = options.fleet;
    this.breakersOpen = new Gauge({
      name: 'hermes_model_breakers_open',
      help: 'Circuit breakers of endpoints and models open or probing now (read from Redis at scrape time).',
      registers,
      async collect() {
        if (fleet?.breakersOpen) this.set(await fleet.breakersOpen());
      },
    });
    this.queueJobs = new Gauge({
      name: 'hermes_queue_jobs',
      help: "Jobs in the product's BullMQ queues, by queue and state (read from Redis at scrape time).",
      labelNames: ['queue', 'state'],
      registers,
      async collect() {
        if (!fleet) return;
        this.reset();
        for (const [queue, counts] of Object.entries(await fleet.queueJobs())) {
          for (const [state, n] of Object.entries(counts)) this.set({ queue, state }, n);
        }
      },
    });
    this.workersAlive = new Gauge({
      name: 'hermes_workers_alive',
      help: 'Worker processes whose liveness heartbeat is fresh (read from Redis at scrape time).',
      registers,
      async collect() {
        if (fleet) this.set(await fleet.workersAlive());
      },
    });
  }

  /** Where `hermes_platform_state` reads the platforms' states (the gateway's registry). */
  observePlatforms(read: () => Array<{ name: string; state: string }>): void {
    this.platformStates = read;
  }

  /** Record a finished turn. @param seconds - its wall time */
  turnFinished(kind: TurnKind, outcome: TurnOutcome, seconds: number): void {
    this.turns.inc({ kind, outcome });
    this.turnDuration.observe({ kind }, Math.max(0, seconds));
  }

  /** Record one model call that ended (`ok`, `fallback` or `failed`) with its tokens. */
  modelCallEnded(
    kind: string,
    outcome: Exclude<ModelCallOutcome, 'retried'>,
    tokens: { inputTokens: number; outputTokens: number; cachedTokens: number },
  ): void {
    this.modelCalls.inc({ kind, outcome });
    if (tokens.inputTokens > 0) this.modelTokens.inc({ kind, direction: 'input' }, tokens.inputTokens);
    if (tokens.outputTokens > 0) this.modelTokens.inc({ kind, direction: 'output' }, tokens.outputTokens);
    if (tokens.cachedTokens > 0) this.modelTokens.inc({ kind, direction: 'cached' }, tokens.cachedTokens);
  }

  /** Count a transient answer the client is retrying. */
  modelCallRetried(kind: string): void {
    this.modelCalls.inc({ kind, outcome: 'retried' });
  }

  /** Count a model a call went past because its circuit breaker was open. */
  modelCallSkipped(kind: string): void {
    this.modelCalls.inc({ kind, outcome: 'skipped' });
  }

  /** Count a refusal for length and what it taught. */
  contextRefused(kind: string, learned: RefusalLearned): void {
    this.modelRefusals.inc({ kind, learned });
  }

  /** Count a circuit breaker that opened. */
  breakerOpened(model: string): void {
    this.breakerOpens.inc({ model });
  }

  /** The Prometheus text exposition and its content type. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/** The BullMQ states reported by `hermes_queue_jobs`. */
export const QUEUE_STATES = ['waiting', 'prioritized', 'active', 'delayed', 'failed', 'completed', 'paused', 'waiting-children'] as const;

/**
 * Scrape-time reads of shared state: BullMQ's own job counts of `queues`, and
 * the fresh members of the worker liveness set.
 */
export function fleetReadings(input: {
  redis: { zcount(key: string, min: number | string, max: number | string): Promise<number> };
  workersKey: string;
  queues: Array<{ name: string; getJobCounts(...types: string[]): Promise<Record<string, number>> }>;
  /** The stored breakers (`ModelStateStore.list`), for `hermes_model_breakers_open`. */
  models?: { list(): Promise<Array<{ breaker?: BreakerRecord }>> };
  now?: () => number;
}): FleetReadings {
  const now = input.now ?? Date.now;
  return {
    async queueJobs() {
      const entries = await Promise.all(input.queues.map(async (q) => [q.name, await q.getJobCounts(...QUEUE_STATES)] as const));
      return Object.fromEntries(entries);
    },
    async workersAlive() {
      return await countAliveWorkers(input.redis, input.workersKey, now());
    },
    async breakersOpen() {
      const at = now();
      return (await input.models?.list())?.filter((m) => breakerState(m.breaker, at) !== 'closed').length ?? 0;
    },
  };
}
