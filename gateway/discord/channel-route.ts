/**
 * Where a Discord message came from, as a delivery target: its channel, or —
 * for a message in a thread — the thread's parent channel and the thread
 * (`discord:<channel>:<thread>`). A thread is a channel of its own, so a
 * message only names the thread; whether a guild channel is a thread is asked
 * once (`GET /channels/{id}`) and remembered. Direct messages have no threads.
 */
import { ChannelType, type API, type APIChannel } from '@discordjs/core';
import type { Logger } from 'pino';
import type { DiscordTarget } from '../../scheduler/delivery/delivery-target.ts';

const THREAD_TYPES: ReadonlySet<number> = new Set([ChannelType.AnnouncementThread, ChannelType.PublicThread, ChannelType.PrivateThread]);

/** Channels remembered at most (oldest forgotten first). */
const MAX_REMEMBERED = 5000;

/** The target of a channel whose type and parent are known (an interaction carries them). */
export function targetOfChannel(channel: Pick<APIChannel, 'id' | 'type'> & { parent_id?: string | null }): DiscordTarget {
  if (THREAD_TYPES.has(channel.type) && channel.parent_id) return { kind: 'discord', chatId: channel.parent_id, threadId: channel.id };
  return { kind: 'discord', chatId: channel.id };
}

export class ChannelRoutes {
  private readonly known = new Map<string, DiscordTarget>();

  constructor(
    private readonly api: API,
    private readonly log: Logger,
  ) {}

  /**
   * The target of a message's channel. A guild channel's type is looked up once; when the lookup
   * fails the channel is taken as it is (replies then go to the thread itself, which works too).
   */
  async targetOf(channelId: string, inGuild: boolean): Promise<DiscordTarget> {
    if (!inGuild) return { kind: 'discord', chatId: channelId };
    const known = this.known.get(channelId);
    if (known) return known;
    let target: DiscordTarget;
    try {
      target = targetOfChannel(await this.api.channels.get(channelId));
    } catch (err) {
      this.log.warn({ channelId, err: (err as Error).message }, 'Discord channel lookup failed; taking it as a channel');
      return { kind: 'discord', chatId: channelId };
    }
    if (this.known.size >= MAX_REMEMBERED) this.known.delete(this.known.keys().next().value!);
    this.known.set(channelId, target);
    return target;
  }
}
