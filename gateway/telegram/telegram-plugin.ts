/**
 * The Telegram platform plugin's manifest: enabled when a bot token is
 * configured, `not-enabled` otherwise. Its `load()` imports the adapter module
 * on demand (grammY is not loaded by a gateway without Telegram).
 */
import type { PlatformPlugin } from '../plugins/platform-plugin.ts';
import type { TelegramAdapterDeps } from './telegram-adapter.ts';

/** The Telegram platform plugin: loads lazily (enabled only with `telegram.bot_token`) and returns the running adapter. */
export function telegramPlugin(deps: TelegramAdapterDeps): PlatformPlugin {
  return {
    name: 'telegram',
    availability: deps.config.telegram.bot_token ? 'enabled' : 'not-enabled',
    async load(ctx) {
      const { loadTelegramAdapter } = await import('./telegram-adapter.ts');
      return await loadTelegramAdapter(deps, ctx);
    },
  };
}
