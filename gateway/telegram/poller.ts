/**
 * Telegram long polling with the offset confirmed only after storage (SPEC §8).
 *
 * grammY's `bot.start()` confirms each batch's offset before the handlers'
 * writes are known to be durable, so the gateway drives `getUpdates` itself:
 *
 *   1. hold the poll lease (one poller per bot token across gateways);
 *   2. `getUpdates(offset)` — this request confirms every update below `offset`;
 *   3. store each update in order (`storeUpdate` resolves only after Redis took it);
 *   4. only then move `offset` past the batch (in memory and in Redis).
 *
 * A crash anywhere before step 2 of the next round leaves the batch unconfirmed:
 * Telegram delivers it again and the inbox job ids (`tg-<update_id>`) dedupe
 * what was already stored. The offset in Redis lets a gateway that takes over
 * skip updates another instance already stored; it expires after a day, well
 * before Telegram could restart its update ids (a week without updates).
 *
 * Failures: a 409 Conflict (another getUpdates on this token, e.g. the old
 * holder's last long poll) and network errors are retried with doubling
 * backoff (`gateway.poll_retry_initial_seconds` … `poll_retry_max_seconds`);
 * 401/404 (bad token) are fatal for the adapter and reported via `onFatal`.
 */
import { GrammyError, type Api } from 'grammy';
import type { Update } from 'grammy/types';
import type { RedisClient } from '../../scheduler/redis/connection-factory.ts';
import type { Logger } from 'pino';
import { PlatformError } from '../../scheduler/errors/platform-error.ts';
import type { PollLease } from './poll-lease.ts';
import { luaScript, runLuaScript } from '../../scheduler/redis/lua-script.ts';

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
  /** A failure the poller cannot recover from (bad token); polling has stopped. */
  onFatal: (err: PlatformError) => void;
  log: Logger;
}

export class TelegramPoller {
  private running = false;
  private loop: Promise<void> | undefined;
  private pollAbort: AbortController | undefined;
  private wakeSleep: (() => void) | undefined;
  private offset = 0;
  private polls = 0;

  constructor(private readonly options: PollerOptions) {
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
    this.loop = this.run().catch((err: Error) => {
      this.options.log.error({ err: err.message }, 'Telegram poller stopped unexpectedly');
    });
  }

  /**
   * Stop: abort the in-flight getUpdates (nothing it received is confirmed),
   * let the batch being stored finish, release the lease.
   * Resolves when the loop has exited and the lease is released.
   */
  async stop(): Promise<void> {
    this.running = false;
    this.pollAbort?.abort();
    this.wakeSleep?.();
    await this.loop;
    await this.options.lease.release();
  }

  private async sleep(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      this.wakeSleep = () => {
        clearTimeout(t);
        resolve();
      };
    });
    this.wakeSleep = undefined;
  }

  private async run(): Promise<void> {
    const { api, lease, redis, log } = this.options;
    let failures = 0;
    let standbyLogged = false;
    const backoff = () => Math.min(this.options.retryMaxMs, this.options.retryInitialMs * 2 ** Math.min(failures - 1, 20));
    while (this.running) {
      let held: boolean;
      try {
        held = await lease.acquire();
      } catch (err) {
        log.warn({ err: (err as Error).message }, 'Telegram poll lease: Redis unavailable');
        await this.sleep(lease.retryMs);
        continue;
      }
      if (!held) {
        if (!standbyLogged) {
          log.info({ holder: await lease.currentHolder().catch(() => null) }, 'another gateway polls this bot; standing by');
          standbyLogged = true;
        }
        await this.sleep(await lease.standbyWaitMs().catch(() => lease.retryMs));
        continue;
      }
      standbyLogged = false;
      let updates: Update[];
      try {
        const stored = Number((await redis.get(this.options.offsetKey)) ?? 0);
        if (stored > this.offset) this.offset = stored;
        this.pollAbort = new AbortController();
        this.polls++;
        updates = await api.getUpdates(
          { offset: this.offset > 0 ? this.offset : undefined, timeout: this.options.timeoutSeconds, allowed_updates: ['message'] },
          grammySignal(this.pollAbort.signal),
        );
        failures = 0;
      } catch (err) {
        if (!this.running || this.pollAbort?.signal.aborted) continue;
        failures++;
        const wait = backoff();
        if (err instanceof GrammyError && (err.error_code === 401 || err.error_code === 404)) {
          this.running = false;
          await lease.release();
          this.options.onFatal(
            new PlatformError(`Telegram refused the bot token (${err.error_code} ${err.description}).`, {
              platform: 'telegram', method: 'getUpdates', errorCode: err.error_code, cause: err,
            }),
          );
          return;
        }
        if (err instanceof GrammyError && err.error_code === 409) {
          log.warn({ retryMs: wait, failures }, `Telegram getUpdates 409 Conflict (another poller on this bot token); retrying in ${wait} ms`);
        } else {
          log.warn({ retryMs: wait, failures, err: describe(err) }, `Telegram getUpdates failed; retrying in ${wait} ms`);
        }
        await this.sleep(wait);
        continue;
      }
      if (updates.length === 0) continue;
      try {
        for (const update of updates) {
          if (update.update_id < this.offset) continue;
          await this.options.store(update);
        }
        const next = updates[updates.length - 1]!.update_id + 1;
        await runLuaScript(redis, SET_MAX_OFFSET, [this.options.offsetKey], [String(next), String(OFFSET_TTL_SECONDS)]);
        this.offset = Math.max(this.offset, next);
      } catch (err) {
        failures++;
        const wait = backoff();
        log.warn({ err: describe(err), retryMs: wait }, 'storing Telegram updates failed; the batch stays unconfirmed and is fetched again');
        await this.sleep(wait);
      }
    }
  }
}

/** grammY types AbortSignal with its own shim; the platform's signal is what it uses at run time. */
export function grammySignal(signal: AbortSignal): Parameters<Api['getUpdates']>[1] {
  return signal as unknown as Parameters<Api['getUpdates']>[1];
}

/** An error description without the bot token (grammY's HttpError never includes the URL unless asked). */
function describe(err: unknown): string {
  if (err instanceof GrammyError) return `${err.error_code} ${err.description}`;
  return (err as Error)?.message ?? String(err);
}
