/**
 * The environment a command gets: loop `--run`, `--command NAME`, cron
 * `--script`, and any other command a worker starts on a turn's behalf.
 *
 * Rule (the whole of it): a command never inherits the worker's environment.
 * It gets
 *   1. the base variables {@link BASE_COMMAND_ENV} copied from the worker's
 *      environment when set there (`PATH` falls back to {@link DEFAULT_PATH});
 *   2. the variables the operator lets through by name (`command_env.pass`
 *      for every command, `commands.<name>.pass_env` for a named command),
 *      copied from the worker's environment when set there;
 *   3. the fixed values the operator sets (`commands.<name>.env`);
 *   4. the turn's own variables (`HERMES_SESSION_ID`, `HERMES_TICK`,
 *      `HERMES_CRON_JOB_ID`, …), which win over everything above.
 * So `API_SERVER_KEY`, `OPENAI_API_KEY`, `TELEGRAM_BOT_TOKEN`, `REDIS_URL` and
 * every other secret of the worker reach a command only when the operator
 * names it in config. Config is trusted (docs/DESIGN.md §3); chat and `/v1` input can
 * set none of this.
 */

/** Variables every command gets from the worker's environment when they are set there. */
export const BASE_COMMAND_ENV = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR'] as const;

/** `PATH` of a command when the worker's environment has none. */
export const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';

/** What the operator lets into a command's environment (from config). */
export interface CommandEnvPolicy {
  /** Names copied from the worker's environment when set there. */
  pass?: readonly string[];
  /** Fixed values. */
  set?: Readonly<Record<string, string>>;
}

/**
 * Build a command's environment by the rule above.
 *
 * @param source - the worker's own environment (the process's, passed down by the composition root)
 * @param policies - operator policies, applied in order (global first, then the named command's)
 * @param turn - the turn's variables (`HERMES_*`); they win
 * @returns a fresh object; nothing else of `source` is in it
 */
export function commandEnv(
  source: Readonly<Record<string, string | undefined>>,
  policies: readonly CommandEnvPolicy[] = [],
  turn: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  const copy = (name: string) => {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  };
  for (const name of BASE_COMMAND_ENV) copy(name);
  env.PATH ??= DEFAULT_PATH;
  for (const policy of policies) {
    for (const name of policy.pass ?? []) copy(name);
    Object.assign(env, policy.set ?? {});
  }
  return Object.assign(env, turn);
}
