/**
 * What `hermes up` prints once it is up: where each part is and what is missing, so a new user sees
 * at a glance why a turn would fail — the HTTP API and its key (where it is, how to print it), the model endpoint and
 * model (or "no model: agent turns will fail"), Telegram on or off, Redis, the log file, and how to
 * detach, attach and stop. Pure: the caller passes what it started.
 */
import type { HermesConfig } from '../scheduler/config/config.ts';
import { agentModel, NO_MODEL } from '../scheduler/agent-model.ts';
import type { ApiAuthSummary } from '../scheduler/config/api-key.ts';

/** What `hermes up` started: the gateway's HTTP address and what it requires (`Gateway.auth`), or no gateway. */
export type UpFacts = UpParts & ({ apiUrl: string; auth: ApiAuthSummary } | { apiUrl: undefined });

/** What `hermes up` started besides the gateway's HTTP API. */
interface UpParts {
  /** How Redis is reached, without a password (`describeTopology`). */
  redis: string;
  /** State of the Telegram plugin when the gateway runs (`PlatformStatus.state`), if it has one. */
  telegramState?: string;
  /** State of the Slack plugin when the gateway runs, if it has one. */
  slackState?: string;
  /** State of the Discord plugin when the gateway runs, if it has one. */
  discordState?: string;
  /** The chat is attached to this session (else `hermes up --no-chat` or no terminal). */
  chatSession?: string;
  /** Logs go to this file (with the chat attached). */
  logFile?: string;
}

/** An endpoint URL as shown: scheme, host and path, never credentials or a query. */
export function showEndpoint(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname === '/' ? '' : u.pathname}`;
  } catch {
    return '(unreadable URL)';
  }
}

/** Plugin states that need no word in the banner (connected, or still connecting). */
const TELEGRAM_FINE = new Set(['ready', 'loading', 'idle']);

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
  const users = cfg.telegram.allowed_users.length;
  const telegram =
    facts.apiUrl === undefined
      ? 'off (--no-gateway)'
      : !cfg.telegram.bot_token
        ? 'off (no TELEGRAM_BOT_TOKEN)'
        : users === 0
          ? 'on, but nobody may use it: TELEGRAM_ALLOWED_USERS is empty'
          : `on · ${users} allowed user${users === 1 ? '' : 's'} (TELEGRAM_ALLOWED_USERS)${facts.telegramState && !TELEGRAM_FINE.has(facts.telegramState) ? ` · ${facts.telegramState.replace(/_/g, ' ')} (the log says why)` : ''}`;
  const slackUsers = cfg.slack.allowed_users.length;
  const slackMode = cfg.slack.app_token ? 'Socket Mode' : 'HTTP at /slack/events';
  const slack =
    facts.apiUrl === undefined
      ? 'off (--no-gateway)'
      : !cfg.slack.bot_token
        ? 'off (no SLACK_BOT_TOKEN)'
        : slackUsers === 0
          ? 'on, but nobody may use it: SLACK_ALLOWED_USERS is empty'
          : `on · ${slackMode} · ${slackUsers} allowed user${slackUsers === 1 ? '' : 's'} (SLACK_ALLOWED_USERS)${facts.slackState && !TELEGRAM_FINE.has(facts.slackState) ? ` · ${facts.slackState.replace(/_/g, ' ')} (the log says why)` : ''}`;
  const discordUsers = cfg.discord.allowed_users.length;
  const discord =
    facts.apiUrl === undefined
      ? 'off (--no-gateway)'
      : discordUsers === 0
        ? 'on, but nobody may use it: DISCORD_ALLOWED_USERS is empty'
        : `on · ${discordUsers} allowed user${discordUsers === 1 ? '' : 's'} (DISCORD_ALLOWED_USERS)${facts.discordState && !TELEGRAM_FINE.has(facts.discordState) ? ` · ${facts.discordState.replace(/_/g, ' ')} (the log says why)` : ''}`;
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
    `  Telegram  ${telegram}`,
    ...(cfg.slack.bot_token ? [`  Slack     ${slack}`] : []),
    ...(cfg.discord.bot_token ? [`  Discord   ${discord}`] : []),
    `  Redis     ${facts.redis}`,
    ...(facts.logFile ? [`  logs      ${facts.logFile}`] : []),
    facts.chatSession !== undefined
      ? `Chat on session "${facts.chatSession}": Ctrl+D detaches (the stack keeps running), Ctrl+C stops everything.`
      : 'Ctrl+C stops it. Attach from another terminal: hermes chat',
  ];
}
