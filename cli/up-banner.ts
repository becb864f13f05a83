/**
 * What `hermes up` prints once it is up: where each part is and what is missing, so a new user sees
 * at a glance why a turn would fail — the HTTP API and its key (where it is, how to print it), the model
 * endpoint and model (or "no model: agent turns will fail"), each platform (off and why, starting, on,
 * or failed and why), Redis, the log file, and how to detach, attach and stop; then, for a platform
 * still starting, one line once it has started or failed (`platformStartedLine`). Pure: the caller
 * passes what it started.
 */
import type { HermesConfig } from '../scheduler/config/config.ts';
import { agentModel, NO_MODEL } from '../scheduler/agent-model.ts';
import type { ApiAuthSummary } from '../scheduler/config/api-key.ts';
import { PLATFORMS, type PlatformName } from '../scheduler/delivery/platforms.ts';
import { showEndpoint } from '../scheduler/errors/upstream-text.ts';
import { formatSeconds } from '../scheduler/interval.ts';

/** A platform's state in the gateway `hermes up` started (its registry's `PlatformStatus`). */
export interface PlatformFact {
  /** `loading`, `ready`, `adapter_unavailable`, … (gateway/plugins/platform-registry.ts) */
  state: string;
  lastError?: string;
}

/** What `hermes up` started: the gateway's HTTP address and what it requires (`Gateway.auth`), or no gateway. */
export type UpFacts = UpParts & ({ apiUrl: string; auth: ApiAuthSummary } | { apiUrl: undefined });

/** What `hermes up` started besides the gateway's HTTP API. */
interface UpParts {
  /** How Redis is reached, without a password (`describeTopology`). */
  redis: string;
  /** Each platform's state in the gateway, by platform; a platform without one counts as starting. */
  platforms?: Partial<Record<PlatformName, PlatformFact>>;
  /** The chat is attached to this session (else `hermes up --no-chat` or no terminal). */
  chatSession?: string;
  /** Logs go to this file (with the chat attached). */
  logFile?: string;
}

/** A platform's state as its banner line starts: `starting`, `on`, `failed (<why>)`, or the gateway's own word. */
function stateWord(fact: PlatformFact | undefined): string {
  if (!fact || fact.state === 'idle' || fact.state === 'loading') return 'starting';
  if (fact.state === 'ready') return 'on';
  if (fact.state === 'adapter_unavailable') return `failed (${fact.lastError ?? 'the log says why'})`;
  return fact.state.replace(/_/g, ' ');
}

/** A platform's banner line after its name: off and why, or its state, how it listens and who may use it. */
function platformLine(cfg: HermesConfig, facts: UpFacts, platform: PlatformName, mode = ''): string {
  const p = PLATFORMS[platform];
  if (facts.apiUrl === undefined) return 'off (--no-gateway)';
  if (!cfg[platform].bot_token) return `off (no ${p.env})`;
  const word = stateWord(facts.platforms?.[platform]);
  const users = cfg[platform].allowed_users.length;
  return users === 0
    ? `${word}${mode}, but nobody may use it: ${p.allowEnv} is empty`
    : `${word}${mode} · ${users} allowed user${users === 1 ? '' : 's'} (${p.allowEnv})`;
}

/**
 * The line `hermes up` prints once a platform that was starting when the banner was printed has
 * started or failed: `Discord is on.`, or `Discord failed to start: <why> <what the gateway does next>`.
 * @returns `undefined` while it is still starting (or for a state that is neither)
 */
export function platformStartedLine(platform: PlatformName, fact: PlatformFact, cfg: HermesConfig): string | undefined {
  const name = PLATFORMS[platform].name;
  if (fact.state === 'ready') return `${name} is on.`;
  if (fact.state !== 'adapter_unavailable') return undefined;
  const rearms = cfg.gateway.max_plugin_load_rearms;
  const next =
    rearms > 0
      ? `The gateway tries again ${rearms === 1 ? 'once' : `${rearms} times`}, first in ${formatSeconds(cfg.gateway.reconnect_backoff_seconds[0] ?? 0)}`
      : 'The gateway does not try again';
  return `${name} failed to start: ${fact.lastError ?? 'the log says why.'} ${next}; \`hermes status\` shows its state.`;
}

/**
 * How the HTTP API is protected, in words: the configured key, the home's key file and how to print
 * it, or the `insecure_no_auth` opt-out and what it means (`hermes up`'s banner, `hermes gateway`).
 */
export function apiAuthText(auth: ApiAuthSummary): string {
  if (auth.mode === 'insecure_no_auth') return 'AUTH OFF (api_server.insecure_no_auth): every user of this host can act as you over HTTP';
  if (auth.source === 'config') return 'auth on (Authorization: Bearer $API_SERVER_KEY)';
  return `auth on (Authorization: Bearer <key>) · the key is in ${auth.file}; \`hermes key\` prints it`;
}

/** The banner's lines. */
export function upBanner(cfg: HermesConfig, facts: UpFacts): string[] {
  const model = agentModel(cfg);
  const slackMode = cfg.slack.app_token ? ' · Socket Mode' : ' · HTTP at /slack/events';
  const api = facts.apiUrl === undefined ? 'off (--no-gateway)' : `${facts.apiUrl} · ${apiAuthText(facts.auth)}`;
  return [
    `hermes is up · home ${cfg.home}`,
    `  API       ${api}`,
    ...(facts.apiUrl === undefined
      ? []
      : [
          `  console   ${facts.apiUrl}/ui · ${facts.auth.mode === 'key' ? 'user hermes, the API key as password' : 'no password (api_server.insecure_no_auth)'}`,
        ]),
    `  model     ${model ? `${model.model} at ${showEndpoint(model.baseUrl)}` : NO_MODEL}`,
    `  Telegram  ${platformLine(cfg, facts, 'telegram')}`,
    ...(cfg.slack.bot_token ? [`  Slack     ${platformLine(cfg, facts, 'slack', slackMode)}`] : []),
    ...(cfg.discord.bot_token ? [`  Discord   ${platformLine(cfg, facts, 'discord')}`] : []),
    `  Redis     ${facts.redis}`,
    ...(facts.logFile ? [`  logs      ${facts.logFile}`] : []),
    facts.chatSession !== undefined
      ? `Chat on session "${facts.chatSession}": Ctrl+D detaches (the stack keeps running), Ctrl+C stops everything.`
      : 'Ctrl+C stops it. Attach from another terminal: hermes chat',
  ];
}
