/**
 * The Discord platform adapter (docs/GATEWAY.md "Discord"): the gateway
 * connection (inbound, behind the connection lease), the application commands,
 * and the outbound sender, over `@discordjs/rest` pointed at
 * `discord.api_url` (`DISCORD_API_URL`) and `@discordjs/ws`. Loaded lazily by
 * the platform registry through `discordPlugin` (discord-plugin.ts), so the
 * Discord libraries are only imported when a bot token is configured.
 */
import { API, GatewayDispatchEvents, GatewayIntentBits, type GatewayDispatchPayload } from '@discordjs/core';
import { DiscordAPIError, REST } from '@discordjs/rest';
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { PlatformError } from '../../scheduler/errors/platform-error.ts';
import { networkReason, platformStartFailure } from '../../scheduler/errors/upstream-text.ts';
import { PLATFORMS } from '../../scheduler/delivery/platforms.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import type { HermesQueues } from '../../scheduler/store/queues.ts';
import { OUTBOUND_QUEUES, type OutboundData } from '../../scheduler/delivery/outbound.ts';
import type { HermesMetrics } from '../../scheduler/metrics.ts';
import { openRedisClient, type RedisClient, type RedisTopology } from '../../scheduler/store/redis/connection-factory.ts';
import type { PlatformAdapter, PluginLoadContext } from '../plugins/platform-plugin.ts';
import { AllowList } from '../telegram/allow-list.ts';
import { PollLease } from '../telegram/poll-lease.ts';
import { registerCommands } from './application-commands.ts';
import { ChannelRoutes } from './channel-route.ts';
import { DiscordConnection } from './gateway-connection.ts';
import { storeInteraction, storeMessage, type DiscordInboundDeps } from './inbound.ts';
import { OrderedSender, orderedSenderSettings } from '../outbound/ordered-sender.ts';
import { discordSend } from './discord-send.ts';
import { PlatformRefusals } from '../outbound/refusals.ts';
import { DiscordSessionStore } from './session-store.ts';

/** What the adapter needs from the gateway process. */
export interface DiscordAdapterDeps {
  config: HermesConfig;
  redis: RedisClient;
  /** Where Redis is: the outbound sender opens its own BullMQ connection there. */
  topology: RedisTopology;
  keys: Keys;
  queues: HermesQueues;
  outbound: Queue<OutboundData>;
  instanceId: string;
  log: Logger;
  /** Where sends are counted (`hermes_platform_sends_total{platform="discord"}`). */
  metrics?: HermesMetrics;
}

/**
 * The gateway intents the bot asks for: guild messages and direct messages; the privileged
 * Message Content intent only with `discord.message_content_intent` (DMs and mentions carry
 * their text without it).
 */
export function discordIntents(messageContent: boolean): number {
  return GatewayIntentBits.GuildMessages | GatewayIntentBits.DirectMessages | (messageContent ? GatewayIntentBits.MessageContent : 0);
}

/**
 * Connect: check the token (`GET /users/@me`), learn the application id, and build the adapter (not started).
 * @throws PlatformError when Discord refuses the token or cannot be reached
 */
export async function loadDiscordAdapter(deps: DiscordAdapterDeps, ctx: PluginLoadContext): Promise<PlatformAdapter> {
  const dc = deps.config.discord;
  const token = dc.bot_token;
  if (!token) throw new PlatformError('discord.bot_token is not set.', { platform: 'discord' });
  const maxRetryAfterMs = deps.config.gateway.max_retry_after_seconds * 1000;
  // Rate limits are the library's: buckets kept, a 429's retry_after waited out — unless longer than the cap (discord-send.ts).
  const rest = new REST({ api: dc.api_url, version: '10', rejectOnRateLimit: (limit) => limit.retryAfter > maxRetryAfterMs }).setToken(
    token,
  );
  const api = new API(rest);
  try {
    const me = await api.users.getCurrent({ signal: ctx.signal });
    const applicationId = dc.register_commands ? (await api.applications.getCurrent({ signal: ctx.signal })).id : undefined;
    return new DiscordAdapter(deps, rest, api, me.id, applicationId, ctx);
  } catch (err) {
    rest.clearHashSweeper();
    rest.clearHandlerSweeper();
    throw discordStartError(err, dc.api_url);
  }
}

/** Why the token check failed, naming the cause (`platformStartFailure`: a refused token, a wrong `DISCORD_API_URL`, no answer). */
function discordStartError(err: unknown, apiUrl: string): PlatformError {
  const p = PLATFORMS.discord;
  const endpoint = { name: p.name, url: apiUrl, urlSetting: p.urlEnv, tokenSetting: p.env };
  if (err instanceof DiscordAPIError) {
    // `No Description` is the client's stand-in for an answer without Discord's error body.
    const message = err.message === 'No Description' ? undefined : err.message;
    return new PlatformError(platformStartFailure(endpoint, { kind: 'answer', status: err.status, message }), {
      platform: 'discord',
      method: 'getCurrentUser',
      errorCode: err.status,
      cause: err,
    });
  }
  return new PlatformError(platformStartFailure(endpoint, { kind: 'network', reason: networkReason(err, (err as Error).message) }), {
    platform: 'discord',
    method: 'getCurrentUser',
    cause: err,
  });
}

class DiscordAdapter implements PlatformAdapter {
  private readonly connection: DiscordConnection;
  private readonly sender: OrderedSender;
  private readonly bull: RedisClient;
  private readonly log: Logger;
  private stopped: Promise<void> | undefined;
  private partsSent = 0;

  constructor(
    private readonly deps: DiscordAdapterDeps,
    private readonly rest: REST,
    private readonly api: API,
    botId: string,
    private readonly applicationId: string | undefined,
    ctx: PluginLoadContext,
  ) {
    const { config, keys, redis } = deps;
    this.log = deps.log.child({ platform: 'discord', botId });
    const allow = new AllowList(config.discord.allowed_users);
    if (allow.size === 0) this.log.warn('DISCORD_ALLOWED_USERS is empty: every Discord user is refused');
    const inbound: DiscordInboundDeps = {
      redis,
      keys,
      queues: deps.queues,
      outbound: deps.outbound,
      api,
      allow,
      botId,
      refusals: new PlatformRefusals({
        platform: 'discord',
        redis,
        keys,
        outbound: deps.outbound,
        botId,
        intervalSeconds: config.discord.refusal_interval_seconds,
        log: this.log,
      }),
      channels: new ChannelRoutes(api, this.log),
      maxChars: config.agent.max_prompt_chars,
      log: this.log,
    };
    this.connection = new DiscordConnection({
      token: config.discord.bot_token!,
      intents: discordIntents(config.discord.message_content_intent),
      rest,
      lease: new PollLease(
        redis,
        keys.discordGatewayLease(botId),
        deps.instanceId,
        config.gateway.poll_lease_ttl_seconds * 1000,
        this.log,
        {
          lease: 'Discord connection lease',
          held: 'this gateway connects as the bot',
          lost: 'the connection closes',
        },
      ),
      sessions: new DiscordSessionStore(redis, keys.discordGatewaySession(botId), this.log),
      onDispatch: (payload) => dispatch(payload, inbound),
      onFatal: (err) => ctx.onFatal(err),
      log: this.log,
    });
    this.bull = openRedisClient(deps.topology, 'bullmq');
    this.bull.on('error', () => {});
    this.sender = new OrderedSender(
      {
        queueName: OUTBOUND_QUEUES.discord,
        queue: deps.outbound,
        redis,
        connection: this.bull,
        keys,
        ...orderedSenderSettings(config),
        log: this.log,
        countSend: (outcome) => {
          if (outcome === 'sent') this.partsSent++;
          deps.metrics?.platformSends.inc({ platform: 'discord', outcome });
        },
      },
      discordSend(api),
    );
  }

  async start(): Promise<void> {
    if (this.applicationId) {
      // Typed `/loop …` works without them: a refused registration is told, not fatal.
      await registerCommands(this.api, this.applicationId).then(
        () => this.log.info('Discord application commands registered'),
        (err: Error) => this.log.warn({ err: err.message }, 'Discord application commands not registered'),
      );
    }
    await this.sender.start();
    this.connection.start();
  }

  async stopInbound(): Promise<void> {
    await this.connection.stop();
  }

  stop(): Promise<void> {
    this.stopped ??= (async () => {
      await this.connection.stop().catch((err: Error) => this.log.warn({ err: err.message }, 'Discord connection stop failed'));
      await this.sender
        .stop(this.deps.config.gateway.outbound_stop_timeout_seconds * 1000)
        .catch((err: Error) => this.log.warn({ err: err.message }, 'Discord outbound stop failed'));
      this.rest.clearHashSweeper();
      this.rest.clearHandlerSweeper();
      this.bull.disconnect();
    })();
    return this.stopped;
  }

  status(): Record<string, unknown> {
    return { ...this.connection.status(), partsSent: this.partsSent };
  }
}

/** Route one dispatch to its handler; other events are ignored. */
async function dispatch(payload: GatewayDispatchPayload, deps: DiscordInboundDeps): Promise<void> {
  if (payload.t === GatewayDispatchEvents.MessageCreate) await storeMessage(payload.d, deps);
  else if (payload.t === GatewayDispatchEvents.InteractionCreate) await storeInteraction(payload.d, deps);
}
