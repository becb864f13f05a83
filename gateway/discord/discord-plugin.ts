/**
 * The Discord platform plugin's manifest: enabled when a bot token is
 * configured (`DISCORD_BOT_TOKEN`), `not-enabled` otherwise. Its `load()`
 * imports the adapter module on demand (the Discord libraries are not loaded
 * by a gateway without Discord).
 */
import type { PlatformPlugin } from '../plugins/platform-plugin.ts';
import type { DiscordAdapterDeps } from './discord-adapter.ts';

/** The Discord platform plugin: loads lazily (enabled only with `discord.bot_token`) and returns the running adapter. */
export function discordPlugin(deps: DiscordAdapterDeps): PlatformPlugin {
  return {
    name: 'discord',
    availability: deps.config.discord.bot_token ? 'enabled' : 'not-enabled',
    async load(ctx) {
      const { loadDiscordAdapter } = await import('./discord-adapter.ts');
      return await loadDiscordAdapter(deps, ctx);
    },
  };
}
