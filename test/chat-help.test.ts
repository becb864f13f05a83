/**
 * The chat's short help (`/help`, `/start`): each surface's own spelling of the commands and its own
 * allow-list; a terminal or web chat names every platform this configuration serves, and only those.
 */
import { describe, expect, it } from 'vitest';
import { configSchema } from '../scheduler/config/config.ts';
import type { Origin } from '../scheduler/session/origin.ts';
import { shortHelp } from '../worker/chat/slash-commands.ts';

const config = (platforms: Record<string, unknown> = {}) => ({ ...configSchema().parse(platforms), home: '/nonexistent' });
const help = (surface: Origin['surface'], platforms?: Record<string, unknown>) =>
  shortHelp({ origin: { surface }, config: config(platforms) });

const ALL_ON = {
  telegram: { bot_token: 't', allowed_users: ['1'] },
  slack: { bot_token: 's', allowed_users: ['U1', 'U2'] },
  discord: { bot_token: 'd', allowed_users: ['3', '4', '5'] },
};

describe('chat help', () => {
  it('a terminal chat names every configured platform with its allow-list', () => {
    expect(help('chat', ALL_ON)).toMatch(
      /\nTelegram: 1 allow-listed user \(TELEGRAM_ALLOWED_USERS\) · Slack: 2 allow-listed users \(SLACK_ALLOWED_USERS\) · Discord: 3 allow-listed users \(DISCORD_ALLOWED_USERS\)\.$/,
    );
    expect(help('web', { discord: ALL_ON.discord })).toMatch(/\nDiscord: 3 allow-listed users \(DISCORD_ALLOWED_USERS\)\.$/);
    expect(help('chat')).toMatch(/\nNo chat platform is configured \(Telegram, Slack, Discord\)\.$/);
    expect(help('chat')).not.toMatch(/Telegram: 0/);
  });

  it("each platform's user is told about their own allow-list", () => {
    expect(help('telegram', ALL_ON)).toMatch(/You are on this bot's allow-list \(1 user allowed in TELEGRAM_ALLOWED_USERS\)\.$/);
    expect(help('slack', ALL_ON)).toMatch(/You are on this app's allow-list \(2 users allowed in SLACK_ALLOWED_USERS\)\.$/);
    expect(help('discord', ALL_ON)).toMatch(/You are on this bot's allow-list \(3 users allowed in DISCORD_ALLOWED_USERS\)\.$/);
  });

  it("Slack's help spells every command as a subcommand of /hermes; other surfaces as slash commands", () => {
    const slack = help('slack', ALL_ON);
    expect(slack).toMatch(/^\/hermes loop \[every\] <interval> <prompt> — a recurring task \(\/hermes loop help for more\)$/m);
    expect(slack).toMatch(/^\/hermes status — the schedules of this chat · \/hermes stop — stop them$/m);
    expect(slack).not.toMatch(/(^|[\s(])\/(loop|heartbeat|hb|goal|status|stop|help)\b/m);
    expect(help('telegram', ALL_ON)).toMatch(/^\/loop \[every\] <interval> <prompt> — a recurring task \(\/loop help for more\)$/m);
  });
});
