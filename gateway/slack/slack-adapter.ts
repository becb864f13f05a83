/**
 * The Slack platform adapter: events in (HTTP at `POST /slack/events`, or
 * Socket Mode when `SLACK_APP_TOKEN` is set), replies out (`chat.postMessage`
 * through the ordered sender). Loaded lazily by the platform registry through
 * `slackPlugin` (slack-plugin.ts), so the Slack libraries are only imported when
 * a bot token is configured. Setup for operators: docs/GATEWAY.md "Slack".
 *
 * Acknowledgement: an event is acknowledged (HTTP 200, or the Socket Mode
 * envelope's ack) only after it is stored in Redis (inbound.ts); nothing is held
 * in memory, so the adapter has no held inbound queue to hand over.
 */
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import { SocketModeClient } from '@slack/socket-mode';
import {
  LogLevel,
  WebClient,
  WebAPIHTTPError,
  WebAPIPlatformError,
  WebAPIRateLimitedError,
  type Logger as SlackLogger,
} from '@slack/web-api';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import type { HermesMetrics } from '../../scheduler/metrics.ts';
import { PlatformError } from '../../scheduler/errors/platform-error.ts';
import { networkReason, platformStartFailure } from '../../scheduler/errors/upstream-text.ts';
import { PLATFORMS } from '../../scheduler/delivery/platforms.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import type { HermesQueues } from '../../scheduler/store/queues.ts';
import { OUTBOUND_QUEUES, type OutboundData } from '../../scheduler/delivery/outbound.ts';
import { openRedisClient, type RedisClient, type RedisTopology } from '../../scheduler/store/redis/connection-factory.ts';
import type { PlatformAdapter, PlatformHttpAnswer, PlatformHttpRequest, PluginLoadContext } from '../plugins/platform-plugin.ts';
import { OrderedSender, orderedSenderSettings, type PlatformSend, type SendFailure } from '../outbound/ordered-sender.ts';
import { answerSlackRequest } from './events-endpoint.ts';
import { storeSlackEvent, storeSlashCommand, type SlackEventCallback, type SlackInboundDeps, type SlackSlashCommand } from './inbound.ts';
import { PlatformRefusals } from '../outbound/refusals.ts';
import { slackParts } from './render-mrkdwn.ts';

/** What the adapter needs from the gateway process. */
export interface SlackAdapterDeps {
  config: HermesConfig;
  redis: RedisClient;
  /** Where Redis is: the sender opens its own BullMQ connection there. */
  topology: RedisTopology;
  keys: Keys;
  queues: HermesQueues;
  outbound: Queue<OutboundData>;
  log: Logger;
  metrics?: HermesMetrics;
}

/** Slack's platform errors that say "try again later", not "never". */
const TRANSIENT_ERRORS = new Set(['ratelimited', 'internal_error', 'fatal_error', 'service_unavailable', 'request_timeout']);

/**
 * Connect: check the bot token with `auth.test` and build the adapter (not started).
 * @throws PlatformError when Slack refuses the token or cannot be reached, or neither
 *   `SLACK_SIGNING_SECRET` nor `SLACK_APP_TOKEN` says how events arrive
 */
export async function loadSlackAdapter(deps: SlackAdapterDeps, ctx: PluginLoadContext): Promise<PlatformAdapter> {
  const settings = deps.config.slack;
  if (!settings.bot_token) throw new PlatformError('No Slack bot token is configured (SLACK_BOT_TOKEN).', { platform: 'slack' });
  if (!settings.app_token && !settings.signing_secret) {
    throw new PlatformError('Slack events need SLACK_SIGNING_SECRET (HTTP at /slack/events) or SLACK_APP_TOKEN (Socket Mode).', {
      platform: 'slack',
    });
  }
  const log = deps.log.child({ platform: 'slack' });
  const logger = slackLogger(log);
  const slackApiUrl = settings.api_url ? settings.api_url.replace(/\/?$/, '/') : undefined;
  // 429s and network errors go back to the sender, which waits out Retry-After or lets the queue retry.
  const web = new WebClient(settings.bot_token, {
    ...(slackApiUrl ? { slackApiUrl } : {}),
    logger,
    rejectRateLimitedCalls: true,
    retryConfig: { retries: 0 },
    timeout: deps.config.gateway.redis_timeout_ms * 5,
  });
  let auth;
  try {
    ctx.signal.throwIfAborted();
    auth = await web.auth.test();
  } catch (err) {
    throw slackStartError(err, slackApiUrl);
  }
  if (!auth.user_id) throw new PlatformError('Slack auth.test did not name the bot user.', { platform: 'slack', method: 'auth.test' });
  return new SlackAdapter(deps, web, { botUserId: auth.user_id, appId: auth.bot_id ?? auth.user_id, slackApiUrl, logger }, ctx, log);
}

/** Slack's answers to `auth.test` that mean the token itself was refused. */
const TOKEN_REFUSALS = new Set(['invalid_auth', 'not_authed', 'token_revoked', 'token_expired', 'account_inactive']);

/** Slack's own Web API address, where the client sends without `slack.api_url`. */
const SLACK_WEB_API = 'https://slack.com/api/';

/** Why `auth.test` failed, naming the cause (`platformStartFailure`; Slack's own refusals by their error code). */
function slackStartError(err: unknown, apiUrl: string | undefined): PlatformError {
  const p = PLATFORMS.slack;
  const endpoint = { name: p.name, url: apiUrl ?? SLACK_WEB_API, ...(apiUrl ? { urlSetting: p.urlEnv } : {}), tokenSetting: p.env };
  const options = { platform: 'slack', method: 'auth.test', cause: err };
  if (err instanceof WebAPIPlatformError) {
    const code = err.data.error;
    const text = TOKEN_REFUSALS.has(code)
      ? `Slack refused the bot token (${p.env}): auth.test answered ${code}.`
      : `Slack's auth.test answered ${code}.`;
    return new PlatformError(text, options);
  }
  if (err instanceof WebAPIHTTPError) {
    const text = platformStartFailure(endpoint, { kind: 'answer', status: err.statusCode, message: err.statusMessage });
    return new PlatformError(text, { ...options, errorCode: err.statusCode });
  }
  return new PlatformError(
    platformStartFailure(endpoint, { kind: 'network', reason: networkReason(err, (err as Error).message) }),
    options,
  );
}

/** `@slack/logger`'s interface over pino (the libraries' own lines at debug, warnings kept). */
function slackLogger(log: Logger): SlackLogger {
  const child = log.child({ component: 'slack-sdk' });
  const text = (msg: unknown[]) => msg.map((m) => (typeof m === 'string' ? m : JSON.stringify(m))).join(' ');
  return {
    debug: (...m) => child.debug(text(m)),
    info: (...m) => child.debug(text(m)),
    warn: (...m) => child.warn(text(m)),
    error: (...m) => child.error(text(m)),
    setLevel: () => {},
    getLevel: () => LogLevel.INFO,
    setName: () => {},
  };
}

class SlackAdapter implements PlatformAdapter {
  private readonly inbound: SlackInboundDeps;
  private readonly sender: OrderedSender;
  private readonly connection: RedisClient;
  private readonly socket: SocketModeClient | undefined;
  private readonly signingSecret: string | undefined;
  private readonly outboundStopMs: number;
  private inboundOpen = true;
  private events = 0;
  private stopped: Promise<void> | undefined;

  constructor(
    deps: SlackAdapterDeps,
    private readonly web: WebClient,
    ids: { botUserId: string; appId: string; slackApiUrl: string | undefined; logger: SlackLogger },
    ctx: PluginLoadContext,
    private readonly log: Logger,
  ) {
    const { config, keys } = deps;
    const allowed = new Set(config.slack.allowed_users);
    if (allowed.size === 0) log.warn('SLACK_ALLOWED_USERS is empty: every Slack user is refused');
    this.signingSecret = config.slack.signing_secret;
    this.outboundStopMs = config.gateway.outbound_stop_timeout_seconds * 1000;
    this.inbound = {
      redis: deps.redis,
      keys,
      queues: deps.queues,
      outbound: deps.outbound,
      allowed,
      botUserId: ids.botUserId,
      maxChars: config.agent.max_prompt_chars,
      log,
      refusals: new PlatformRefusals({
        platform: 'slack',
        redis: deps.redis,
        keys,
        outbound: deps.outbound,
        botId: ids.appId,
        intervalSeconds: config.slack.refusal_interval_seconds,
        log,
      }),
    };
    this.connection = openRedisClient(deps.topology, 'bullmq');
    this.connection.on('error', () => {});
    const send: PlatformSend = {
      platform: 'slack',
      parts: (text) => slackParts(text),
      send: async (data, part) => {
        const res = await this.web.chat.postMessage({
          channel: data.chatId,
          text: part,
          mrkdwn: true,
          ...(data.threadId ? { thread_ts: data.threadId } : {}),
        });
        return String(res.ts);
      },
      classify: (err) => classifySlackError(err),
    };
    this.sender = new OrderedSender(
      {
        queueName: OUTBOUND_QUEUES.slack,
        queue: deps.outbound,
        redis: deps.redis,
        connection: this.connection,
        keys,
        ...orderedSenderSettings(config),
        log,
        countSend: (outcome) => deps.metrics?.platformSends.inc({ platform: 'slack', outcome }),
      },
      send,
    );
    if (config.slack.app_token) {
      this.socket = new SocketModeClient({
        appToken: config.slack.app_token,
        logger: ids.logger,
        clientOptions: { ...(ids.slackApiUrl ? { slackApiUrl: ids.slackApiUrl } : {}) },
      });
      this.socket.on('slack_event', (envelope: SocketEnvelope) => void this.onEnvelope(envelope));
    }
    void ctx;
  }

  async start(): Promise<void> {
    await this.sender.start();
    if (this.socket) await this.socket.start();
    this.log.info({ mode: this.socket ? 'socket' : 'http' }, 'Slack adapter started');
  }

  async stopInbound(): Promise<void> {
    this.inboundOpen = false;
    await this.socket?.disconnect().catch(() => {});
  }

  stop(): Promise<void> {
    this.stopped ??= (async () => {
      await this.stopInbound();
      await this.sender.stop(this.outboundStopMs).catch((err: Error) => this.log.warn({ err: err.message }, 'outbound stop failed'));
      this.connection.disconnect();
    })();
    return this.stopped;
  }

  status(): Record<string, unknown> {
    return { mode: this.socket ? 'socket' : 'http', events: this.events };
  }

  async handleHttp(request: PlatformHttpRequest): Promise<PlatformHttpAnswer> {
    if (!this.signingSecret)
      return {
        status: 404,
        json: { error: 'Slack events arrive over Socket Mode here (SLACK_APP_TOKEN); HTTP needs SLACK_SIGNING_SECRET.' },
      };
    if (!this.inboundOpen) return { status: 503, json: { error: 'gateway draining' } };
    try {
      const answer = await answerSlackRequest(request.rawBody, request.headers, { ...this.inbound, signingSecret: this.signingSecret });
      if (answer.status === 200) this.events++;
      return answer;
    } catch (err) {
      // Not stored: not acknowledged, so Slack retries.
      this.log.warn({ err: (err as Error).message }, 'Slack event not stored; Slack will retry it');
      return { status: 503, json: { error: 'not stored, retry' } };
    }
  }

  /** One Socket Mode envelope: store, then ack (a failed store is not acked, so Slack retries). */
  private async onEnvelope(envelope: SocketEnvelope): Promise<void> {
    if (!this.inboundOpen) return;
    try {
      if (envelope.type === 'events_api') {
        if (envelope.retry_num) this.log.info({ retryNum: envelope.retry_num, reason: envelope.retry_reason }, 'Slack retried an event');
        await storeSlackEvent(envelope.body as SlackEventCallback, this.inbound);
        await envelope.ack();
      } else if (envelope.type === 'slash_commands') {
        const answer = await storeSlashCommand(envelope.body as SlackSlashCommand, this.inbound);
        await envelope.ack(answer.ephemeral ? { response_type: 'ephemeral', text: answer.ephemeral } : undefined);
      } else {
        await envelope.ack();
        return;
      }
      this.events++;
    } catch (err) {
      this.log.warn({ err: (err as Error).message, type: envelope.type }, 'Slack event not stored; not acknowledged, Slack will retry it');
    }
  }
}

/** What `SocketModeClient` emits as `slack_event`. */
interface SocketEnvelope {
  ack(response?: Record<string, unknown>): Promise<void>;
  envelope_id: string;
  type: string;
  body: unknown;
  retry_num?: number;
  retry_reason?: string;
}

/** How the sender treats a `chat.postMessage` error. */
export function classifySlackError(err: unknown): SendFailure {
  if (err instanceof WebAPIRateLimitedError) return { kind: 'rate_limited', retryAfterSeconds: err.retryAfter };
  if (err instanceof WebAPIPlatformError && !TRANSIENT_ERRORS.has(err.data.error)) {
    return {
      kind: 'refused',
      error: new PlatformError(`Slack refused the reply (${err.data.error}).`, {
        platform: 'slack',
        method: 'chat.postMessage',
        cause: err,
      }),
    };
  }
  if (err instanceof WebAPIHTTPError && err.statusCode >= 400 && err.statusCode < 500) {
    return {
      kind: 'refused',
      error: new PlatformError(`Slack refused the reply (HTTP ${err.statusCode}).`, {
        platform: 'slack',
        method: 'chat.postMessage',
        errorCode: err.statusCode,
        cause: err,
      }),
    };
  }
  return { kind: 'transient' };
}
