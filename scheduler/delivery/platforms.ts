/**
 * The messaging platforms a gateway relays, and the names an operator knows each one's settings by:
 * the bot token's setting and variable, the variable that points at another API address, and the
 * allow-list's variable. Every text that names a platform's setting reads it here.
 */
export const PLATFORMS = {
  telegram: {
    name: 'Telegram',
    setting: 'telegram.bot_token',
    env: 'TELEGRAM_BOT_TOKEN',
    urlEnv: 'TELEGRAM_API_ROOT',
    allowEnv: 'TELEGRAM_ALLOWED_USERS',
  },
  slack: { name: 'Slack', setting: 'slack.bot_token', env: 'SLACK_BOT_TOKEN', urlEnv: 'SLACK_API_URL', allowEnv: 'SLACK_ALLOWED_USERS' },
  discord: {
    name: 'Discord',
    setting: 'discord.bot_token',
    env: 'DISCORD_BOT_TOKEN',
    urlEnv: 'DISCORD_API_URL',
    allowEnv: 'DISCORD_ALLOWED_USERS',
  },
} as const;

/** A platform's key: `telegram`, `slack`, `discord` (a session id's and a delivery target's prefix). */
export type PlatformName = keyof typeof PLATFORMS;

/** The platforms in the order they are shown. */
export const PLATFORM_NAMES = Object.keys(PLATFORMS) as PlatformName[];

/** Whether `name` is one of the platforms (not a prototype name: an own key only). */
export function isPlatformName(name: string): name is PlatformName {
  return Object.hasOwn(PLATFORMS, name);
}
