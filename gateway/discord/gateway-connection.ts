/**
 * The Discord gateway connection of one bot, behind the connection lease
 * (docs/GATEWAY.md "Discord"): one WebSocket connection per bot token across
 * every gateway instance — the lease Telegram's poller holds (PollLease), keyed
 * `Keys.discordGatewayLease(botId)`. A standby waits until the lease runs out;
 * the holder that loses it closes its connection at once.
 *
 * The connection itself is `@discordjs/ws`'s WebSocketManager (HELLO, IDENTIFY,
 * heartbeats, zombie detection, RESUME after a drop) over the REST client that
 * fetches `GET /gateway/bot`. Its session is kept by DiscordSessionStore (the
 * resume policy is written there). Dispatches are handled one at a time, in
 * sequence order, and each is confirmed to the session store only after its
 * handler resolved (stored, refused or ignored).
 *
 * Handover: stopping (drain, lease lost) closes the socket with code 4200,
 * which keeps the session resumable, and leaves the session in Redis, so the
 * next holder resumes it and Discord replays what nobody stored.
 */
import { WebSocketManager, WebSocketShardEvents, type SessionInfo } from '@discordjs/ws';
import type { REST } from '@discordjs/rest';
import type { GatewayDispatchPayload } from '@discordjs/core';
import type { Logger } from 'pino';
import { PlatformError } from '../../scheduler/errors/platform-error.ts';
import type { PollLease } from '../telegram/poll-lease.ts';
import type { DiscordSessionStore } from './session-store.ts';
import { sleep } from '../../scheduler/time/sleep.ts';

/** Close code of a handover: not 1000/1001, so Discord keeps the session resumable. */
const HANDOVER_CLOSE_CODE = 4200;

/** Settings of the connection. */
export interface DiscordConnectionOptions {
  token: string;
  /** Gateway intents bit field (`discordIntents`). */
  intents: number;
  rest: REST;
  lease: PollLease;
  sessions: DiscordSessionStore;
  /** Handle one dispatch; resolves when it was handled (a rejection is logged and the event is not confirmed). */
  onDispatch: (payload: GatewayDispatchPayload) => Promise<void>;
  /** The connection cannot recover (bad token, disallowed intents). */
  onFatal: (err: PlatformError) => void;
  log: Logger;
}

export class DiscordConnection {
  private running = false;
  private manager: WebSocketManager | undefined;
  private loopDone: Promise<void> | undefined;
  /** Cuts the current `sleep` short (`stop()`, a lost lease). */
  private sleepAbort: AbortController | undefined;
  /** The chain of dispatch handlers: one at a time, in the order received. */
  private handling: Promise<void> = Promise.resolve();
  private dispatches = 0;
  private connects = 0;
  private standbyLogged = false;
  /** An event could not be stored: later ones are not handled either, and the connection resumes from the last handled one. */
  private replayNeeded = false;

  constructor(private readonly options: DiscordConnectionOptions) {
    options.lease.onLost = () => this.sleepAbort?.abort();
  }

  /** Whether this gateway holds the lease and has a connection. */
  get connected(): boolean {
    return this.running && this.manager !== undefined;
  }

  /** Figures for `/health`. */
  status(): Record<string, unknown> {
    return { connected: this.connected, connects: this.connects, dispatches: this.dispatches };
  }

  /** Start in the background: stand by until the lease is free, then connect. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loopDone = this.loop().catch((err: Error) =>
      this.options.log.error({ err: err.message }, 'Discord connection loop stopped unexpectedly'),
    );
  }

  /**
   * Stop: close the connection for a handover (the session stays resumable),
   * finish the dispatch being handled, release the lease. Resolves when all that is done.
   */
  async stop(): Promise<void> {
    this.running = false;
    this.sleepAbort?.abort();
    await this.loopDone;
    await this.options.lease.release();
  }

  /** Hold the lease, connect, and stay connected while it is held; close when it is lost or on stop. */
  private async loop(): Promise<void> {
    const { lease, log } = this.options;
    while (this.running) {
      let held: boolean;
      try {
        held = await lease.acquire();
      } catch (err) {
        log.warn({ err: (err as Error).message }, 'Discord connection lease: Redis unavailable');
        await this.sleep(lease.retryMs);
        continue;
      }
      if (!held) {
        if (!this.standbyLogged) {
          log.info(
            { holder: await lease.currentHolder().catch(() => null) },
            'another gateway is connected as this Discord bot; standing by',
          );
          this.standbyLogged = true;
        }
        await this.sleep(await lease.standbyWaitMs().catch(() => lease.retryMs));
        continue;
      }
      this.standbyLogged = false;
      try {
        await this.connect();
      } catch (err) {
        log.warn({ err: (err as Error).message }, 'Discord gateway connection failed; trying again');
        await this.disconnect();
        await this.sleep(lease.retryMs);
        continue;
      }
      // Connected: wait until stopped, the lease is lost or an event could not be stored.
      while (this.running && lease.held && !this.replayNeeded) await this.sleep(lease.retryMs);
      await this.disconnect();
      if (this.replayNeeded) {
        this.replayNeeded = false;
        await this.sleep(lease.retryMs);
      }
    }
  }

  private async connect(): Promise<void> {
    const { token, intents, rest, sessions, log } = this.options;
    await sessions.load();
    const manager = new WebSocketManager({
      token,
      intents,
      rest,
      shardCount: 1,
      retrieveSessionInfo: () => sessions.retrieve(),
      updateSessionInfo: (_shardId: number, info: SessionInfo | null) => sessions.update(info),
    });
    this.manager = manager;
    manager.on(WebSocketShardEvents.Dispatch, (payload) => {
      this.dispatches++;
      this.handling = this.handling.then(() => this.handle(payload));
    });
    manager.on(WebSocketShardEvents.Resumed, () => log.info('Discord gateway session resumed'));
    manager.on(WebSocketShardEvents.Ready, () => log.info('Discord gateway session ready (identified)'));
    manager.on(WebSocketShardEvents.Error, (err) => {
      // The library closes the shard for good on these (bad token 4004, intents 4013/4014, …).
      const message = err.message;
      log.error({ err: message }, 'Discord gateway refused the connection');
      this.running = false;
      this.sleepAbort?.abort();
      this.options.onFatal(
        new PlatformError(`Discord gateway refused the connection: ${message}.`, { platform: 'discord', method: 'gateway', cause: err }),
      );
    });
    this.connects++;
    await manager.connect();
  }

  /**
   * Handle one dispatch, then confirm its sequence. A failure (Redis refused the write) confirms
   * nothing more on this connection: it is closed and resumed from the last handled event, so
   * Discord replays the failed one and everything after it.
   */
  private async handle(payload: GatewayDispatchPayload): Promise<void> {
    if (this.replayNeeded) return;
    try {
      await this.options.onDispatch(payload);
      await this.options.sessions.confirm(payload.s);
    } catch (err) {
      this.replayNeeded = true;
      this.sleepAbort?.abort();
      this.options.log.warn(
        { err: (err as Error).message, event: payload.t, sequence: payload.s },
        'Discord event not stored; the connection resumes so it is replayed',
      );
    }
  }

  /** Close the connection for a handover and let the handlers finish. */
  private async disconnect(): Promise<void> {
    const manager = this.manager;
    this.manager = undefined;
    if (!manager) return;
    this.options.sessions.keepForHandover();
    try {
      await manager.destroy({ code: HANDOVER_CLOSE_CODE, reason: 'gateway handover' });
    } catch (err) {
      this.options.log.warn({ err: (err as Error).message }, 'Discord connection close failed');
    }
    manager.removeAllListeners();
    await this.handling;
  }

  /** Wait `ms`, cut short by `stop()` or a lost lease. */
  private async sleep(ms: number): Promise<void> {
    if (!this.running) return;
    this.sleepAbort = new AbortController();
    await sleep(ms, this.sleepAbort.signal);
    this.sleepAbort = undefined;
  }
}
