/**
 * Whether a platform target (`telegram:…`, `slack:…`, `discord:…`) has a bot to send it: a gateway
 * sends to a platform only when that platform's bot token is set (gateway/gateway-process.ts). Without one its
 * deliveries wait in the outbound queue, and `hermes cron doctor` names them only once they have waited
 * ten minutes (`DELIVERY_STUCK_MS`, scheduler/cron/cron-reports.ts). So it is said at once: `hermes cron add`,
 * `edit` and `show` on stderr (the shell's configuration), and the gateway's job views (`/api/cron/jobs`, the console's job
 * page) in `warnings` (the gateway's own).
 */
import { formatDeliveryTarget, parseDeliveryTarget, targetOfRoute, type DeliveryTarget, type MessagingRoute } from './delivery-target.ts';
import { isPlatformName, PLATFORMS, type PlatformName as Platform } from './platforms.ts';

/** The bot tokens of a configuration, as `HermesConfig` holds them (`null`/absent: none). */
export type PlatformBotTokens = { readonly [P in Platform]: { readonly bot_token?: string | null } };

const isPlatform = (t: DeliveryTarget): t is Extract<DeliveryTarget, { kind: Platform }> => isPlatformName(t.kind);

/**
 * One line per platform of `deliver` that has no bot token in `tokens`, e.g. `this shell's configuration has no
 * Telegram bot token (TELEGRAM_BOT_TOKEN or telegram.bot_token): deliveries to telegram:42 stay queued until a
 * gateway with one runs.`; none when every platform target has one. `origin` counts as the platform of the
 * route it stands for (named `origin (telegram:42)`).
 * @param deliver - targets in their text form, as a cron job keeps them (already validated)
 * @param whose - whose configuration was read, as the sentence's subject: `this shell's configuration`, `This gateway`
 * @param originRoute - the route the job was created from (`Origin.route`), which `origin` delivers to
 */
export function unconfiguredPlatformWarnings(
  tokens: PlatformBotTokens,
  deliver: readonly string[],
  whose: string,
  originRoute?: MessagingRoute,
): string[] {
  const byPlatform = new Map<Platform, string[]>();
  for (const text of deliver) {
    const written = parseDeliveryTarget(text);
    const target = written.kind === 'origin' ? originRoute && targetOfRoute(originRoute) : written;
    if (!target || !isPlatform(target) || tokens[target.kind].bot_token) continue;
    const named = written.kind === 'origin' ? `origin (${formatDeliveryTarget(target)})` : text;
    byPlatform.set(target.kind, [...(byPlatform.get(target.kind) ?? []), named]);
  }
  return [...byPlatform].map(([platform, targets]) => {
    const p = PLATFORMS[platform];
    return (
      `${whose} has no ${p.name} bot token (${p.env} or ${p.setting}): ` +
      `deliveries to ${targets.join(', ')} stay queued until a gateway with one runs.`
    );
  });
}
