/**
 * The Slack platform plugin's manifest: enabled when a bot token is configured,
 * `not-enabled` otherwise. Its `load()` imports the adapter module on demand (the
 * Slack libraries are not loaded by a gateway without Slack). It owns the
 * gateway's `POST /slack/events` path (events-endpoint.ts).
 */
import type { PlatformPlugin } from '../plugins/platform-plugin.ts';
import type { SlackAdapterDeps } from './slack-adapter.ts';

/** The Slack plugin's HTTP path (Events API and the `/hermes` slash command). */
export const SLACK_EVENTS_PATH = '/slack/events';

/** The Slack platform plugin: loads lazily (enabled only with `slack.bot_token`) and returns the running adapter. */
export function slackPlugin(deps: SlackAdapterDeps): PlatformPlugin {
  return {
    name: 'slack',
    availability: deps.config.slack.bot_token ? 'enabled' : 'not-enabled',
    httpPaths: [SLACK_EVENTS_PATH],
    async load(ctx) {
      const { loadSlackAdapter } = await import('./slack-adapter.ts');
      return await loadSlackAdapter(deps, ctx);
    },
  };
}
