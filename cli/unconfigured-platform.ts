/**
 * Whether a platform target (`telegram:…`, `slack:…`, `discord:…`) has a bot to send it: a gateway
 * sends to a platform only when that platform's bot token is set (gateway/gateway-process.ts). Without one its
 * deliveries wait in the outbound queue, and `hermes cron doctor` names them only once they have waited
 * ten minutes (`DELIVERY_STUCK_MS`, scheduler/cron/cron-reports.ts); `hermes cron add` and `edit` say so when the job is set.
 */
import type { HermesConfig } from '../scheduler/config/config.ts';
import { parseDeliveryTarget, type DeliveryTarget } from '../scheduler/delivery/delivery-target.ts';

/** Each platform's name, the setting that turns it on and its environment variable. */
const PLATFORMS = {
  telegram: { name: 'Telegram', setting: 'telegram.bot_token', env: 'TELEGRAM_BOT_TOKEN' },
  slack: { name: 'Slack', setting: 'slack.bot_token', env: 'SLACK_BOT_TOKEN' },
  discord: { name: 'Discord', setting: 'discord.bot_token', env: 'DISCORD_BOT_TOKEN' },
} as const;

type Platform = keyof typeof PLATFORMS;

const isPlatform = (t: DeliveryTarget): t is Extract<DeliveryTarget, { kind: Platform }> => t.kind in PLATFORMS;

/** Whose configuration the CLI read: a gateway started with a token of its own sends these. */
export const SHELL_GATEWAY_CONFIG = "this shell's configuration; a gateway started with a token of its own sends them";

/**
 * One warning line per platform of `deliver` that has no bot token in `config`, e.g. `Warning: no Telegram
 * bot: deliveries to telegram:42 wait in the outbound queue until a gateway with TELEGRAM_BOT_TOKEN
 * (telegram.bot_token) runs.`; none when every platform target has one.
 * @param deliver - targets in their text form, as a cron job keeps them (already validated)
 * @param where - whose configuration was read, when not the gateway's own
 */
export function unconfiguredPlatformWarnings(config: HermesConfig, deliver: readonly string[], where?: string): string[] {
  const byPlatform = new Map<Platform, string[]>();
  for (const text of deliver) {
    const target = parseDeliveryTarget(text);
    if (!isPlatform(target) || config[target.kind].bot_token) continue;
    byPlatform.set(target.kind, [...(byPlatform.get(target.kind) ?? []), text]);
  }
  return [...byPlatform].map(([platform, targets]) => {
    const p = PLATFORMS[platform];
    return (
      `Warning: no ${p.name} bot: deliveries to ${targets.join(', ')} wait in the outbound queue until a gateway with ` +
      `${p.env} (${p.setting}) runs${where ? ` (${where})` : ''}.`
    );
  });
}
