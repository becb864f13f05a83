/**
 * Whether a chat message is a command, and for whom (field report F16). The
 * one place every surface asks, so no command can slip past the rule:
 *
 * - `/name args` is a command.
 * - `/name@bot args` is a command only when `bot` is this bot's username
 *   (compared case-insensitively, as Telegram does); it is then normalised to
 *   `/name args`. Addressed to any other bot it is *not for us*: ignored
 *   entirely — not run, not sent to the model, not answered. This holds for
 *   every command, known or unknown.
 * - Anything else (`/etc/hosts is down`, plain text) is a message.
 *
 * The gateway knows the bot's username and normalises commands addressed to
 * it, so a `/name@bot` that reaches a worker was for someone else; workers
 * therefore ask without a username and ignore every addressed command.
 */

/** What a chat text is. */
export type ChatCommand =
  | { kind: 'message' }
  | {
      kind: 'command';
      /** Lower-cased command name without the slash (`loop`). */
      name: string;
      /** Everything after the command word, trimmed at the start. */
      args: string;
      /** The text with this bot's `@username` removed (`/loop 5m x`). */
      text: string;
    }
  | { kind: 'other-bot'; name: string; bot: string };

const COMMAND = /^\/([A-Za-z][\w-]*)(?:@([A-Za-z0-9_]+))?(?:\s+([\s\S]*))?$/;

/**
 * Classify `text`.
 * @param botUsername - this bot's username (Telegram `getMe`); without one, any
 *   `@name` marks a command for another bot
 */
export function parseChatCommand(text: string, botUsername?: string): ChatCommand {
  const trimmed = text.trim();
  const m = COMMAND.exec(trimmed);
  if (!m) return { kind: 'message' };
  const name = m[1]!.toLowerCase();
  const bot = m[2];
  if (bot !== undefined && (botUsername === undefined || bot.toLowerCase() !== botUsername.toLowerCase())) {
    return { kind: 'other-bot', name, bot };
  }
  const args = m[3] ?? '';
  return { kind: 'command', name, args, text: args === '' ? `/${m[1]}` : `/${m[1]} ${args}` };
}
