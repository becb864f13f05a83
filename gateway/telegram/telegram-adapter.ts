/**
 * The Telegram platform adapter: the poller (inbound, behind the poll lease)
 * and the outbound sender, over grammY's `Api` client pointed at
 * `telegram.api_root` (default the public Bot API). Loaded lazily by the
 * platform registry through `telegramPlugin` (telegram-plugin.ts), so grammY is
 * only imported when a bot token is configured.
 */
import { prepareBot } from './bot-setup.ts';
import { TypingIndicator } from './typing.ts';
import type { HermesMetrics } from '../../scheduler/metrics.ts';
import { autoRetry } from '@grammyjs/auto-retry';
import { Api, GrammyError, HttpError } from 'grammy';
import { createHash } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { PlatformError } from '../../scheduler/errors/platform-error.ts';
import { networkReason, platformStartFailure, type PlatformEndpoint } from '../../scheduler/errors/upstream-text.ts';
import { PLATFORMS } from '../../scheduler/delivery/platforms.ts';
import { QUEUES, type Keys } from '../../scheduler/store/keys.ts';
import type { TelegramOutboundData } from '../../scheduler/delivery/outbound.ts';
import type { HermesQueues } from '../../scheduler/store/queues.ts';
import { openRedisClient, type RedisClient, type RedisTopology } from '../../scheduler/store/redis/connection-factory.ts';
import type { PlatformAdapter, PluginLoadContext } from '../plugins/platform-plugin.ts';
import { AllowList } from './allow-list.ts';
import { storeUpdate } from './inbound.ts';
import { PlatformRefusals } from '../outbound/refusals.ts';
import { OrderedSender, orderedSenderSettings } from '../outbound/ordered-sender.ts';
import { telegramSend } from './telegram-send.ts';
import type { FormattedText } from './render-markdown.ts';
import { PollLease } from './poll-lease.ts';
import { TelegramPoller, grammySignal } from './poller.ts';

/** What the adapter needs from the gateway process. */
export interface TelegramAdapterDeps {
  config: HermesConfig;
  redis: RedisClient;
  /** Where Redis is: the outbound sender opens its own BullMQ connection there. */
  topology: RedisTopology;
  keys: Keys;
  queues: HermesQueues;
  outbound: Queue<TelegramOutboundData>;
  instanceId: string;
  log: Logger;
  /** Where sends are counted (`hermes_telegram_sends_total`). */
  metrics?: HermesMetrics;
}

/**
 * The bot's id for keys: the numeric part before the token's colon (public:
 * it is the bot's user id), or a digest when the token has no such part.
 */
export function botIdOf(token: string): string {
  const head = token.split(':')[0] ?? '';
  return /^\d+$/.test(head) ? head : createHash('sha256').update(token).digest('hex').slice(0, 16);
}

/**
 * Connect: check the token with getMe and build the adapter (not started).
 * @throws PlatformError when Telegram refuses the token or cannot be reached
 */
export async function loadTelegramAdapter(deps: TelegramAdapterDeps, ctx: PluginLoadContext): Promise<PlatformAdapter> {
  const tg = deps.config.telegram;
  const token = tg.bot_token;
  if (!token) throw new PlatformError('No Telegram bot token is configured (TELEGRAM_BOT_TOKEN).', { platform: 'telegram' });
  const client = { ...(tg.api_root ? { apiRoot: tg.api_root } : {}) };
  const pollApi = new Api(token, client);
  const sendApi = new Api(token, client);
  // auto-retry waits out 429s only; network errors and 5xx go back to the outbound queue,
  // whose retries (exponential backoff) are durable and reported one by one.
  sendApi.config.use(
    autoRetry({
      maxDelaySeconds: deps.config.gateway.max_retry_after_seconds,
      maxRetryAttempts: 5,
      rethrowHttpErrors: true,
      rethrowInternalServerErrors: true,
    }),
  );
  let me;
  try {
    me = await pollApi.getMe(grammySignal(ctx.signal));
  } catch (err) {
    throw telegramStartError(err, telegramEndpoint(deps.config));
  }
  return new TelegramAdapter(deps, pollApi, sendApi, me.username, ctx);
}

/** Telegram's own Bot API address, where grammY sends without `telegram.api_root`. */
const TELEGRAM_BOT_API = 'https://api.telegram.org';

/** The Bot API the adapter talks to, as failure texts name it. */
function telegramEndpoint(config: HermesConfig): PlatformEndpoint {
  const p = PLATFORMS.telegram;
  const root = config.telegram.api_root;
  return { name: p.name, url: root ?? TELEGRAM_BOT_API, ...(root ? { urlSetting: p.urlEnv } : {}), tokenSetting: p.env, tokenInPath: true };
}

/**
 * Why getMe failed, naming the cause (`platformStartFailure`). Never the client's own message of a
 * failed request: it holds the request's URL, and the URL holds the token.
 */
function telegramStartError(err: unknown, endpoint: PlatformEndpoint): PlatformError {
  const options = { platform: 'telegram', method: 'getMe', cause: err };
  if (err instanceof GrammyError) {
    const text = platformStartFailure(endpoint, { kind: 'answer', status: err.error_code, message: err.description });
    return new PlatformError(text, { ...options, errorCode: err.error_code });
  }
  if (err instanceof HttpError && (err.error as { type?: unknown } | undefined)?.type === 'invalid-json') {
    return new PlatformError(platformStartFailure(endpoint, { kind: 'unexpected', what: 'an answer that is not JSON' }), options);
  }
  return new PlatformError(platformStartFailure(endpoint, { kind: 'network', reason: networkReason(err) }), options);
}

class TelegramAdapter implements PlatformAdapter {
  private readonly poller: TelegramPoller;
  private readonly sender: OrderedSender<FormattedText, number>;
  private readonly connection: RedisClient;
  private readonly log: Logger;
  private readonly outboundStopMs: number;
  private readonly typing: TypingIndicator;
  private readonly sendApi: Api;
  private stopped: Promise<void> | undefined;

  constructor(deps: TelegramAdapterDeps, pollApi: Api, sendApi: Api, botUsername: string | undefined, ctx: PluginLoadContext) {
    const { config, keys } = deps;
    const botId = botIdOf(config.telegram.bot_token!);
    this.log = deps.log.child({ platform: 'telegram', botId });
    this.outboundStopMs = config.gateway.outbound_stop_timeout_seconds * 1000;
    const allow = new AllowList(config.telegram.allowed_users);
    if (allow.size === 0) this.log.warn('TELEGRAM_ALLOWED_USERS is empty: every Telegram user is refused');
    this.sendApi = sendApi;
    this.typing = new TypingIndicator(sendApi, {
      refreshMs: config.gateway.typing_refresh_seconds * 1000,
      maxMs: config.agent.timeout_seconds * 1000,
      log: this.log,
    });
    const refusals = new PlatformRefusals({
      platform: 'telegram',
      redis: deps.redis,
      keys,
      outbound: deps.outbound,
      botId,
      intervalSeconds: config.telegram.refusal_interval_seconds,
      log: this.log,
    });
    const lease = new PollLease(
      deps.redis,
      keys.telegramPollLease(botId),
      deps.instanceId,
      config.gateway.poll_lease_ttl_seconds * 1000,
      this.log,
    );
    this.poller = new TelegramPoller({
      api: pollApi,
      lease,
      redis: deps.redis,
      offsetKey: keys.telegramOffset(botId),
      store: (update) =>
        storeUpdate(update, {
          redis: deps.redis,
          keys,
          queues: deps.queues,
          outbound: deps.outbound,
          allow,
          refusals,
          maxChars: config.agent.max_prompt_chars,
          botUsername,
          log: this.log,
          onStored: (chatId, threadId) => this.typing.start(chatId, threadId),
        }),
      timeoutSeconds: config.gateway.poll_timeout_seconds,
      retryInitialMs: config.gateway.poll_retry_initial_seconds * 1000,
      retryMaxMs: config.gateway.poll_retry_max_seconds * 1000,
      endpoint: telegramEndpoint(config),
      onFatal: (err) => ctx.onFatal(err),
      log: this.log,
    });
    this.connection = openRedisClient(deps.topology, 'bullmq');
    this.connection.on('error', () => {});
    this.sender = new OrderedSender(
      {
        queueName: QUEUES.outboundTelegram,
        queue: deps.outbound,
        redis: deps.redis,
        connection: this.connection,
        keys,
        ...orderedSenderSettings(config),
        log: this.log,
        countSend: (outcome) => deps.metrics?.telegramSends.inc({ outcome }),
      },
      telegramSend(sendApi, (chatId, threadId) => this.typing.stop(chatId, threadId)),
    );
  }

  async start(): Promise<void> {
    await prepareBot(this.sendApi, this.log);
    await this.sender.start();
    this.poller.start();
  }

  async stopInbound(): Promise<void> {
    await this.poller.stop();
  }

  stop(): Promise<void> {
    this.stopped ??= (async () => {
      await this.poller.stop().catch((err: Error) => this.log.warn({ err: err.message }, 'poller stop failed'));
      this.typing.stopAll();
      await this.sender.stop(this.outboundStopMs).catch((err: Error) => this.log.warn({ err: err.message }, 'outbound stop failed'));
      this.connection.disconnect();
    })();
    return this.stopped;
  }

  status(): Record<string, unknown> {
    return { polling: this.poller.polling, polls: this.poller.pollCount };
  }
}
