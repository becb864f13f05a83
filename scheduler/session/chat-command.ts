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

/**
 * The flags that make a command turn (`hermes loop … --run '<shell>'`, `--command <name>`,
 * `hermes cron add … --script '<shell>'`). They are the shell's alone: chat input (terminal chat,
 * Telegram) can never create a command turn, so a chat command that carries one is answered with
 * {@link shellOnlyReply} and changes nothing — it is not quietly made part of the prompt.
 */
export const SHELL_ONLY_FLAGS = ['--run', '--command', '--script'] as const;

/**
 * The shell-only flag in a chat command's arguments, if any: `--run`, `--command` or `--script` as a
 * word of its own (or `--run=…`), outside backtick code spans — a prompt may quote one
 * (`` check that `npm test --run` passes ``).
 */
export function shellOnlyFlag(args: string): (typeof SHELL_ONLY_FLAGS)[number] | undefined {
  const outsideCode = args.replace(/`[^`]*`/g, ' ');
  for (const word of outsideCode.split(/\s+/)) {
    const flag = SHELL_ONLY_FLAGS.find((f) => word === f || word.startsWith(`${f}=`));
    if (flag) return flag;
  }
  return undefined;
}

/**
 * The answer to a chat command that carries a shell-only flag: what the flag is for, the shell
 * command that does it for this session, and that nothing changed.
 * @param command - the chat command's name (`loop`, `heartbeat`, `hb`, `goal`, …)
 */
export function shellOnlyReply(command: string, flag: (typeof SHELL_ONLY_FLAGS)[number], sessionId: string): string {
  const kind = command === 'hb' ? 'heartbeat' : command === 'proactive' ? 'loop' : command;
  // A Telegram chat's or Discord channel's session id is also its delivery target (delivery-target.ts).
  const deliver = sessionId.startsWith('telegram:') || sessionId.startsWith('discord:') ? ` --deliver ${sessionId}` : '';
  const turn = flag === '--run' ? "--run '<shell command>'" : '--command <name>';
  const example =
    flag === '--script'
      ? `hermes cron add "<schedule>" --script '<shell command>'${deliver ? ` --deliver ${sessionId}` : ''}`
      : kind === 'heartbeat'
        ? `hermes heartbeat every <interval> <prompt> --session ${sessionId}${deliver} ${turn}`
        : `hermes loop <interval> <prompt> --session ${sessionId}${deliver} ${turn}`;
  return [
    `${flag} works only in the shell: chat messages can never start a command turn. Nothing was changed.`,
    `From a shell on the host: ${example}`,
    'To keep the words in a prompt, put them in backticks.',
  ].join('\n');
}
