/**
 * The typing indicator while a user's message waits for its answer: after the
 * gateway stored a message it sends `sendChatAction(typing)` to that chat, and
 * again every `refreshMs` (Telegram shows it for about 5 s), until a reply is
 * sent to the chat or `maxMs` passed (a turn that ends without a reply must
 * not leave the bot "typing" forever). Best effort: a failed call is logged at
 * debug level and changes nothing else.
 *
 * The gateway does not see turns (workers run them); "a reply to the chat was
 * sent" is what it can observe, so that is what ends the indicator.
 */
import type { Api } from 'grammy';
import type { Logger } from 'pino';
import { threadParams } from './forum-topic.ts';

interface Typing {
  timer: NodeJS.Timeout;
  until: number;
}

export class TypingIndicator {
  private readonly chats = new Map<string, Typing>();

  /**
   * @param options.refreshMs - time between two `sendChatAction` calls (`gateway.typing_refresh_seconds`)
   * @param options.maxMs - longest indicator of one message (`agent.timeout_seconds`)
   */
  constructor(
    private readonly api: Api,
    private readonly options: { refreshMs: number; maxMs: number; log: Logger },
  ) {}

  /** Show "typing…" in a chat (forum topic) until `stop` or the deadline. A running indicator is extended. */
  start(chatId: string, threadId?: string): void {
    const key = `${chatId}:${threadId ?? ''}`;
    const until = Date.now() + this.options.maxMs;
    const running = this.chats.get(key);
    if (running) {
      running.until = until;
      return;
    }
    const send = () => {
      void this.api
        .sendChatAction(chatId, 'typing', threadParams(threadId))
        .catch((err: Error) => this.options.log.debug({ chatId, err: err.message }, 'typing indicator not sent'));
    };
    send();
    const timer = setInterval(() => {
      const t = this.chats.get(key);
      if (!t || Date.now() >= t.until) this.stop(chatId, threadId);
      else send();
    }, this.options.refreshMs);
    timer.unref();
    this.chats.set(key, { timer, until });
  }

  /** End the indicator of a chat (a reply was sent). */
  stop(chatId: string, threadId?: string): void {
    const key = `${chatId}:${threadId ?? ''}`;
    const t = this.chats.get(key);
    if (!t) return;
    clearInterval(t.timer);
    this.chats.delete(key);
  }

  /** End every indicator (adapter stop). */
  stopAll(): void {
    for (const t of this.chats.values()) clearInterval(t.timer);
    this.chats.clear();
  }
}
