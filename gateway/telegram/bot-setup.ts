/**
 * What the Telegram adapter does once at start, before it polls:
 *
 * - `deleteWebhook`: a webhook left behind by another deployment makes every
 *   `getUpdates` answer 409 Conflict forever; long polling needs it gone.
 *   Pending updates are kept (`drop_pending_updates: false`): they are the
 *   messages sent while nobody polled.
 * - `setMyCommands`: the command menu Telegram shows when a user types `/`.
 *
 * Failures are logged at WARNING and do not stop the adapter: polling reports
 * a remaining webhook as 409s (retried with backoff), and the menu is cosmetic.
 */
import type { Api } from 'grammy';
import type { Logger } from 'pino';
import { grammySignal } from './poller.ts';

/** Longest wait for each of the two calls, so an unreachable Telegram does not hold up the start. */
export const SETUP_TIMEOUT_MS = 10_000;

/** The bot's command menu (`setMyCommands`): the chat commands workers interpret. */
export const BOT_COMMANDS: ReadonlyArray<{ command: string; description: string }> = [
  { command: 'loop', description: 'Repeat a prompt: /loop 10m check the CI build' },
  { command: 'heartbeat', description: 'A recurring check-in: /heartbeat every 30m anything new?' },
  { command: 'goal', description: 'A standing goal the agent keeps working toward' },
  { command: 'status', description: 'Loops, heartbeats and the goal of this chat' },
  { command: 'stop', description: 'Stop the loop and heartbeat, pause the goal' },
  { command: 'help', description: 'How to use this bot' },
];

/** Prepare the bot for long polling and register its command menu. Never throws. */
export async function prepareBot(api: Api, log: Logger): Promise<void> {
  try {
    await api.deleteWebhook({ drop_pending_updates: false }, grammySignal(AbortSignal.timeout(SETUP_TIMEOUT_MS)));
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'Telegram deleteWebhook failed; a leftover webhook would make polling answer 409');
  }
  try {
    await api.setMyCommands([...BOT_COMMANDS], {}, grammySignal(AbortSignal.timeout(SETUP_TIMEOUT_MS)));
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'Telegram setMyCommands failed; the command menu is not shown');
  }
}
