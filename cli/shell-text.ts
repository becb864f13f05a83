/**
 * Replies, help texts and errors of `/loop`, `/heartbeat` and `/goal` name
 * chat commands ("/loop resume continues it"). A user at a shell types
 * `hermes loop resume --session S` instead, so the shell surface rewrites
 * those names before printing (pure; chat and Telegram keep the chat forms).
 */

const CHAT_COMMAND = /(^|[\s(`"'])\/(loop|proactive|heartbeat|hb|goal)\b( (?:status|pause|resume|stop|clear|cancel|help))?/gm;

/**
 * Rewrite chat command names in `text` into the shell commands of `sessionId`:
 * `/loop resume` → `hermes loop resume --session S`, `/hb` → `hermes heartbeat`,
 * `Usage: /loop [every] …` → `Usage: hermes loop [every] …`.
 * Control words get the `--session` flag (they act on one session); usage lines
 * and examples keep their own arguments, so the flag is left to the usage line.
 */
export function chatToShell(text: string, sessionId: string): string {
  return text
    .replace(/\(alias \/(hb|proactive); /g, '(')
    .replace(CHAT_COMMAND, (all: string, lead: string, cmd: string, control: string | undefined, offset: number, whole: string) => {
      const name = cmd === 'hb' ? 'heartbeat' : cmd === 'proactive' ? 'loop' : cmd;
      // A list of control words ("status | pause | …") names the flag once, at its end.
      const list = whole.startsWith(' |', offset + all.length);
      return control && !list ? `${lead}hermes ${name}${control} --session ${sessionId}` : `${lead}hermes ${name}${control ?? ''}`;
    });
}
