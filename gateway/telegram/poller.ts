/**
 * Telegram long polling with the offset confirmed only after storage (docs/DESIGN.md §8).
 *
 * grammY's `bot.start()` confirms each batch's offset before the handlers'
 * writes are known to be durable, so the gateway drives `getUpdates` itself.
 * The loop has the shape of grammY's own (`loop` / `fetchUpdates` /
 * `handlePollingError` in its `Bot`), one named step per concern:
 *
 *   1. `holdLease()` — poll only while holding the poll lease;
 *   2. `fetchUpdates()` — `getUpdates(offset)`, which confirms every update below `offset`;
 *   3. `storeUpdates()` — store each update in order (resolves only after Redis took it);
 *   4. `confirm()` — only then move `offset` past the batch (in memory and in Redis);
 *   5. `handlePollingError()` — every failure of steps 1–4: retry, wait or give up.
 *
 * Each policy is decided in one place, named in a comment there:
 *   - poll lease: `holdLease()` (docs/RELIABILITY.md "Telegram polling: one poller per bot token");
 *   - at-least-once inbound: `storeUpdates()` before `confirm()` (docs/RELIABILITY.md
 *     "Telegram inbound: every update reaches a turn, once");
 *   - retry and backoff: `handlePollingError()` and `pollBackoffMs()` (docs/GATEWAY.md
 *     "Telegram polling", settings `poll_retry_initial_seconds` / `poll_retry_max_seconds`);
 *   - drain stops polling: `stop()` (docs/GATEWAY.md "Stopping").
 *
 * A crash anywhere before step 2 of the next round leaves the batch unconfirmed:
 * Telegram delivers it again and the inbox job ids (`tg-<update_id>`) dedupe
 * what was already stored. The offset in Redis lets a gateway that takes over
 * skip updates another instance already stored; it expires after a day, well
 * before Telegram could restart its update ids (a week without updates).
 */
import { GrammyError, type Api } from 'grammy';
import type { Update } from 'grammy/types';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';
import type { Logger } from 'pino';
import { PlatformError } from '../../scheduler/errors/platform-error.ts';
import { platformStartFailure, statusText, type PlatformEndpoint } from '../../scheduler/errors/upstream-text.ts';
import type { PollLease } from './poll-lease.ts';
import { sleep } from '../../scheduler/time/sleep.ts';
import { luaScript, runLuaScript } from '../../scheduler/store/redis/lua-script.ts';

/** How long the stored offset is kept, seconds. */
export const OFFSET_TTL_SECONDS = 24 * 3600;

/** Raise the stored offset, never lower it (`set-max-offset-1.lua`). */
const SET_MAX_OFFSET = luaScript('set-max-offset-1.lua');

/** Settings of the poller (resolved from `gateway.*`). */
export interface PollerOptions {
  /** grammY API client without the auto-retry transformer (the poller retries itself). */
  api: Api;
  lease: PollLease;
  redis: RedisClient;
  /** `Keys.telegramOffset(botId)` */
  offsetKey: string;
  /** Store one update durably; throws when it could not. */
  store: (update: Update) => Promise<unknown>;
  /** Long-poll `timeout`, whole seconds. */
  timeoutSeconds: number;
  /** First retry wait after a 409 or network error, ms; doubles up to `retryMaxMs`. */
  retryInitialMs: number;
  retryMaxMs: number;
  /** Where the Bot API is, as a refused token's text names it (`platformStartFailure`). */
  endpoint: PlatformEndpoint;
  /** A failure the poller cannot recover from (bad token); polling has stopped. */
  onFatal: (err: PlatformError) => void;
  log: Logger;
}

/** The step of a polling round a failure came from (decides how `handlePollingError` answers it). */
export type PollStep = 'holdLease' | 'fetchUpdates' | 'storeUpdates' | 'confirm';

/**
 * Retry policy of the poll loop (docs/GATEWAY.md "Telegram polling"): the wait
 * before the next round after `failures` failed rounds in a row, ms —
 * `initialMs` doubling per failure, capped at `maxMs`. Applies alike to a
 * 409 Conflict, 429, 5xx, network error and a failed store or confirm; a 429
 * waits at least its `retry_after` (see `handlePollingError`).
 */
export function pollBackoffMs(failures: number, initialMs: number, maxMs: number): number {
  return Math.min(maxMs, initialMs * 2 ** Math.min(failures - 1, 20));
}

/**
 * Whether Telegram refused the bot token itself (401 Unauthorized, 404 Not
 * Found on the token's URL): retrying cannot help, the adapter is unavailable.
 */
function isTokenRefused(err: unknown): err is GrammyError {
  return err instanceof GrammyError && (err.error_code === 401 || err.error_code === 404);
}

export class TelegramPoller {
  private running = false;
  private loopDone: Promise<void> | undefined;
  private pollAbort: AbortController | undefined;
  /** Cuts the current `sleep` short (`stop()`). */
  private sleepAbort: AbortController | undefined;
  /** Next update id to ask for; everything below it is stored. */
  private offset = 0;
  private polls = 0;
  /** Failed rounds in a row (reset by an answered getUpdates); drives the backoff. */
  private failures = 0;
  /** Whether "standing by" was logged since the lease was last held (logged once per standby spell). */
  private standbyLogged = false;

  constructor(private readonly options: PollerOptions) {
    // Poll lease policy: a holder that loses the lease stops its getUpdates at once.
    options.lease.onLost = () => this.pollAbort?.abort();
  }

  /** Whether this poller holds the lease and is polling. */
  get polling(): boolean {
    return this.running && this.options.lease.held;
  }

  /** getUpdates calls made (answered or not). */
  get pollCount(): number {
    return this.polls;
  }

  /** Start polling in the background (no-op when running). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.failures = 0;
    this.standbyLogged = false;
    this.loopDone = this.loop().catch((err: Error) => {
      this.options.log.error({ err: err.message }, 'Telegram poller stopped unexpectedly');
    });
  }

  /**
   * Stop — the drain policy (docs/GATEWAY.md "Stopping"): polling ends first,
   * before `/v1` callers are drained. Aborts the in-flight getUpdates (nothing
   * it received is confirmed), wakes a retry wait, lets the batch being stored
   * finish (and be confirmed), releases the lease so a standby takes over at once.
   * Resolves when the loop has exited and the lease is released.
   */
  async stop(): Promise<void> {
    this.running = false;
    this.pollAbort?.abort();
    this.sleepAbort?.abort();
    await this.loopDone;
    await this.options.lease.release();
  }

  /** One round per turn until stopped: lease, fetch, store, confirm; failures go to `handlePollingError`. */
  private async loop(): Promise<void> {
    while (this.running) {
      let step: PollStep = 'holdLease';
      try {
        if (!(await this.holdLease())) continue;
        step = 'fetchUpdates';
        const updates = await this.fetchUpdates();
        if (updates.length > 0) {
          step = 'storeUpdates';
          await this.storeUpdates(updates);
          step = 'confirm';
          await this.confirm(updates);
        }
        // Only a whole round resets the backoff: a batch that is fetched but cannot be stored
        // keeps doubling the wait, so a Redis refusing writes is not asked again every second.
        this.failures = 0;
      } catch (err) {
        await this.handlePollingError(err, step);
      }
    }
  }

  /**
   * Poll lease policy (docs/RELIABILITY.md "Telegram polling: one poller per
   * bot token"): poll only while holding the lease. A standby logs once and
   * waits until the holder's lease runs out.
   * @returns whether this poller holds the lease (false after a standby wait)
   * @throws when Redis could not be asked (handled as step `holdLease`)
   */
  private async holdLease(): Promise<boolean> {
    const { lease, log } = this.options;
    if (await lease.acquire()) {
      this.standbyLogged = false;
      return true;
    }
    if (!this.standbyLogged) {
      log.info({ holder: await lease.currentHolder().catch(() => null) }, 'another gateway polls this bot; standing by');
      this.standbyLogged = true;
    }
    await this.sleep(await lease.standbyWaitMs().catch(() => lease.retryMs));
    return false;
  }

  /**
   * One `getUpdates` long poll from the current offset (raised first to the
   * offset in Redis, which another gateway may have moved). Abortable by
   * `stop()` and by losing the lease.
   * @returns the batch, possibly empty
   * @throws GrammyError / HttpError from Telegram, or a Redis error
   */
  private async fetchUpdates(): Promise<Update[]> {
    const { api, redis, offsetKey, timeoutSeconds } = this.options;
    const stored = Number((await redis.get(offsetKey)) ?? 0);
    if (stored > this.offset) this.offset = stored;
    this.pollAbort = new AbortController();
    this.polls++;
    const updates = await api.getUpdates(
      { offset: this.offset > 0 ? this.offset : undefined, timeout: timeoutSeconds, allowed_updates: ['message'] },
      grammySignal(this.pollAbort.signal),
    );
    return updates;
  }

  /**
   * At-least-once inbound, first half (docs/RELIABILITY.md "Telegram inbound"):
   * store every update of the batch, in order, before anything is confirmed.
   * Updates below the offset were stored already (by this or another gateway).
   * @throws when one could not be stored; the batch then stays unconfirmed
   */
  private async storeUpdates(updates: readonly Update[]): Promise<void> {
    for (const update of updates) {
      if (update.update_id < this.offset) continue;
      await this.options.store(update);
    }
  }

  /**
   * At-least-once inbound, second half: move the offset past a stored batch —
   * in Redis (raised, never lowered) and in memory. Telegram forgets the batch
   * at the next `getUpdates`.
   */
  private async confirm(updates: readonly Update[]): Promise<void> {
    const next = updates[updates.length - 1]!.update_id + 1;
    await runLuaScript(this.options.redis, SET_MAX_OFFSET, [this.options.offsetKey], [String(next), String(OFFSET_TTL_SECONDS)]);
    this.offset = Math.max(this.offset, next);
  }

  /**
   * Retry policy (docs/GATEWAY.md "Telegram polling"), decided here for every step:
   *   - lease: Redis unavailable → wait one lease retry interval;
   *   - getUpdates aborted by `stop()` or a lost lease → no wait, the loop looks again;
   *   - getUpdates 401/404 (bad token) → fatal: polling stops, lease released, `onFatal`;
   *   - getUpdates 409 Conflict, 429, 5xx, network or Redis error → doubling backoff (`pollBackoffMs`);
   *   - store or confirm failed → the same backoff; the batch stays unconfirmed and is fetched again.
   */
  private async handlePollingError(err: unknown, step: PollStep): Promise<void> {
    const { lease, log } = this.options;
    if (step === 'holdLease') {
      log.warn({ err: (err as Error).message }, 'Telegram poll lease: Redis unavailable');
      await this.sleep(lease.retryMs);
      return;
    }
    if (step === 'fetchUpdates') {
      if (!this.running || this.pollAbort?.signal.aborted) return;
      this.failures++;
      // A 429 names how long Telegram wants us to wait (`parameters.retry_after`, seconds, Bot API
      // "ResponseParameters"): never ask again sooner than that, whatever the backoff says.
      const retryAfterMs =
        err instanceof GrammyError && err.error_code === 429 && typeof err.parameters.retry_after === 'number'
          ? err.parameters.retry_after * 1000
          : 0;
      const wait = Math.max(retryAfterMs, pollBackoffMs(this.failures, this.options.retryInitialMs, this.options.retryMaxMs));
      if (isTokenRefused(err)) {
        this.running = false;
        await lease.release();
        this.options.onFatal(
          new PlatformError(
            platformStartFailure(this.options.endpoint, { kind: 'answer', status: err.error_code, message: err.description }),
            {
              platform: 'telegram',
              method: 'getUpdates',
              errorCode: err.error_code,
              cause: err,
            },
          ),
        );
        return;
      }
      if (err instanceof GrammyError && err.error_code === 409) {
        log.warn(
          { retryMs: wait, failures: this.failures },
          `Telegram getUpdates 409 Conflict (another poller on this bot token); retrying in ${wait} ms`,
        );
      } else {
        log.warn({ retryMs: wait, failures: this.failures, err: describe(err) }, `Telegram getUpdates failed; retrying in ${wait} ms`);
      }
      await this.sleep(wait);
      return;
    }
    this.failures++;
    const wait = pollBackoffMs(this.failures, this.options.retryInitialMs, this.options.retryMaxMs);
    log.warn(
      { err: describe(err), retryMs: wait, step },
      'storing Telegram updates failed; the batch stays unconfirmed and is fetched again',
    );
    await this.sleep(wait);
  }

  /** Wait `ms`, cut short by `stop()` (and skipped once stopped: a stopping poller never waits). */
  private async sleep(ms: number): Promise<void> {
    if (!this.running) return;
    this.sleepAbort = new AbortController();
    await sleep(ms, this.sleepAbort.signal);
    this.sleepAbort = undefined;
  }
}

/** grammY types AbortSignal with its own shim; the platform's signal is what it uses at run time. */
export function grammySignal(signal: AbortSignal): Parameters<Api['getUpdates']>[1] {
  return signal as unknown as Parameters<Api['getUpdates']>[1];
}

/** An error description without the bot token (grammY's HttpError never includes the URL unless asked). */
function describe(err: unknown): string {
  if (err instanceof GrammyError) return statusText(err.error_code, err.description);
  return (err as Error)?.message ?? String(err);
}
