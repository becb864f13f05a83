/**
 * What the economy flags may name (docs/CONTEXT.md), checked on every surface before anything is written:
 * - `--model` only a model the operator declared (`agent.models.<name>`);
 * - `--watch` only a check the operator declared: a command tool without required parameters
 *   (`--watch ci`), `read_file:<path>` with the path inside `tools.files.roots` or `http_get:<url>`
 *   with the URL's host on `tools.http.allow` (the tools' own rules, `../tools/tool-reach.ts`),
 *   and only one the creating surface may use (`tools.allow_from`, the toolbox's rule: a tool's
 *   most specific name found in the map decides, `worker/tools/toolbox.ts`).
 * A watch never creates a command: it names a tool the operator declared, and it runs as that tool,
 * with the schedule's surface's rights, at every tick (the toolbox checks again).
 */
import { isAbsolute, resolve } from 'node:path';
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { hostAllowed, pathWithin } from '../tools/tool-reach.ts';
import type { ScheduleEconomy } from './economy-flags.ts';

/**
 * What the check reads of the configuration (`HermesConfig` has it): the declared models and tools.
 * Stated here, not imported: config/ validates with cron/'s parsers, and cron/ checks its economy here.
 */
export interface EconomyConfig {
  agent: { models: Record<string, unknown> };
  tools: {
    files: { roots: readonly string[] };
    http: { allow: readonly string[] };
    commands: Record<string, { parameters?: unknown }>;
    allow_from: Record<string, readonly string[]>;
  };
}

/** A parsed `--watch`: the tool to call, its arguments, and its names for `tools.allow_from` (most specific first). */
export interface WatchCheck {
  tool: string;
  args: Record<string, unknown>;
  groups: string[];
}

/** Parse a `--watch` text. @throws ScheduleInputError for an empty path or URL */
export function parseWatch(spec: string): WatchCheck {
  const colon = spec.indexOf(':');
  const head = colon < 0 ? spec : spec.slice(0, colon);
  const rest = colon < 0 ? '' : spec.slice(colon + 1);
  if (head === 'read_file') {
    if (!rest) throw new ScheduleInputError('--watch read_file:<path> needs a path.', { field: 'watch' });
    return { tool: 'read_file', args: { path: rest }, groups: ['read_file', 'files'] };
  }
  if (head === 'http_get') {
    if (!rest) throw new ScheduleInputError('--watch http_get:<url> needs a URL.', { field: 'watch' });
    return { tool: 'http_get', args: { url: rest }, groups: ['http_get', 'http'] };
  }
  return { tool: spec, args: {}, groups: [spec, 'commands'] };
}

/**
 * Check `economy` against the operator's config for a schedule created from `surface`.
 * @throws ScheduleInputError naming the flag, the value and what is allowed
 */
export function checkEconomy(economy: ScheduleEconomy, config: EconomyConfig, surface: string): void {
  if (economy.model) {
    const declared = Object.keys(config.agent.models);
    if (!declared.includes(economy.model)) {
      throw new ScheduleInputError(
        `--model "${economy.model}" is not a declared model; ${declared.length ? `declared: ${declared.join(', ')}` : 'the operator has declared none (agent.models)'}.`,
        { field: 'model' },
      );
    }
  }
  if (economy.watch) {
    const watch = parseWatch(economy.watch);
    const tools = config.tools;
    const group = watch.groups.find((g) => tools.allow_from[g] !== undefined);
    if (group !== undefined && !tools.allow_from[group]!.includes(surface)) {
      throw new ScheduleInputError(`--watch ${watch.tool}: the tool is not allowed from ${surface} (tools.allow_from.${group}).`, {
        field: 'watch',
      });
    }
    if (watch.tool === 'read_file') checkWatchedPath(String(watch.args.path), tools.files.roots);
    if (watch.tool === 'http_get') checkWatchedUrl(String(watch.args.url), tools.http.allow);
    if (watch.tool !== 'read_file' && watch.tool !== 'http_get') {
      const command = tools.commands[watch.tool];
      const known = Object.keys(tools.commands);
      if (!command) {
        throw new ScheduleInputError(
          `--watch "${economy.watch}" is not a declared check: use a command tool (${known.length ? known.join(', ') : 'none declared in tools.commands'}), read_file:<path> or http_get:<url>.`,
          { field: 'watch' },
        );
      }
      const required = (command.parameters as { required?: unknown } | undefined)?.required;
      if (Array.isArray(required) && required.length > 0) {
        throw new ScheduleInputError(
          `--watch ${watch.tool}: the tool has required parameters (${required.join(', ')}); a watch runs it without any.`,
          { field: 'watch' },
        );
      }
    }
  }
}

/**
 * A watched path must lie inside a root, as `read_file` reads it (a relative path from the first root).
 * The check is on the path as written; `read_file` resolves real paths and symlinks at every run.
 * @throws ScheduleInputError naming the path and the roots
 */
function checkWatchedPath(path: string, roots: readonly string[]): void {
  if (roots.length === 0) throw new ScheduleInputError('--watch read_file:… needs tools.files.roots in the config.', { field: 'watch' });
  const candidate = isAbsolute(path) ? resolve(path) : resolve(roots[0]!, path);
  if (!roots.some((root) => pathWithin(candidate, resolve(root)))) {
    throw new ScheduleInputError(
      `--watch read_file:${path} is outside the folders the tools may read (tools.files.roots: ${roots.join(', ')}).`,
      {
        field: 'watch',
      },
    );
  }
}

/**
 * A watched URL must be http(s) on a host of the allow list, as `http_get` fetches it.
 * @throws ScheduleInputError naming the URL and what is allowed
 */
function checkWatchedUrl(text: string, allow: readonly string[]): void {
  if (allow.length === 0) throw new ScheduleInputError('--watch http_get:… needs tools.http.allow in the config.', { field: 'watch' });
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ScheduleInputError(`--watch http_get:${text} is not a URL.`, { field: 'watch' });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ScheduleInputError(`--watch http_get:${text}: only http and https URLs can be watched.`, { field: 'watch' });
  if (!hostAllowed(url, allow)) {
    throw new ScheduleInputError(`--watch http_get:${text}: ${url.host} is not an allowed host (tools.http.allow: ${allow.join(', ')}).`, {
      field: 'watch',
    });
  }
}
