/**
 * What the economy flags may name (docs/CONTEXT.md), checked on every surface before anything is written:
 * - `--model` only a model the operator declared (`agent.models.<name>`);
 * - `--watch` only a check the operator declared: a command tool without required parameters
 *   (`--watch ci`), `read_file:<path>` (with `tools.files.roots` set) or `http_get:<url>` (with
 *   `tools.http.allow` set), and only one the creating surface may use (`tools.allow_from`, the
 *   toolbox's rule: a tool's most specific name found in the map decides, `worker/tools/toolbox.ts`).
 * A watch never creates a command: it names a tool the operator declared, and it runs as that tool,
 * with the schedule's surface's rights, at every tick (the toolbox checks again).
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
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
    if (watch.tool === 'read_file' && tools.files.roots.length === 0) {
      throw new ScheduleInputError('--watch read_file:… needs tools.files.roots in the config.', { field: 'watch' });
    }
    if (watch.tool === 'http_get' && tools.http.allow.length === 0) {
      throw new ScheduleInputError('--watch http_get:… needs tools.http.allow in the config.', { field: 'watch' });
    }
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
    const group = watch.groups.find((g) => config.tools.allow_from[g] !== undefined);
    if (group !== undefined && !config.tools.allow_from[group]!.includes(surface)) {
      throw new ScheduleInputError(`--watch ${watch.tool}: the tool is not allowed from ${surface} (tools.allow_from.${group}).`, {
        field: 'watch',
      });
    }
  }
}
