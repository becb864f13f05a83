/**
 * Command tools (`tools.commands.<name>`): one function tool per command the
 * operator declared.
 *
 * Argument rule: before anything is spawned, the arguments are checked
 * against the declared `parameters` (JSON Schema, compiled once when the tool
 * is built: `./argument-schema.ts`); a call that does not conform is refused
 * with a sentence naming the argument and the rule, and nothing runs. Two
 * arguments that would land in one variable (`branch` and `BRANCH`) are
 * refused too, so an undeclared name cannot overwrite a checked value.
 *
 * Injection rule: the model's arguments never become shell text. Each argument
 * reaches the command as the environment variable `HERMES_ARG_<NAME>`
 * (upper-cased; non-strings as JSON). A `command` written as a list is run
 * without a shell, and `{name}` inside a list element is replaced by the
 * argument — the element stays one argv entry whatever it contains, and it may
 * not turn into an option (`fillPlaceholders`). A `command` written as a string
 * is the operator's shell line, run as written.
 *
 * A call of a journaled turn (a loop tick, a cron run) gets `HERMES_STEP_ID`: the same on every run
 * of that call, a rerun after a crash included, so the operator's script can dedupe itself. A
 * command is not idempotent unless the operator says so (`tools.on_doubt`).
 *
 * The command runs in a process group of its own, with the command
 * environment (`../command-env.ts`: never the worker's secrets); on timeout or abort the whole group gets
 * SIGTERM, then SIGKILL after `KILL_GRACE_MS`; a backstop ends the group even
 * when the worker has died (`../process-group.ts`).
 */
import { endGroup, spawnInGroup, stopGroup } from '../runtime/process-group.ts';
import { ToolError } from '../../scheduler/errors/tool-error.ts';
import { compileArgumentSchema } from './argument-schema.ts';
import { NO_PARAMETERS, type AgentTool, type ToolParameters } from './tool.ts';
import type { ToolOutput } from './tool-output.ts';

/** Wait between SIGTERM and SIGKILL of a stopped command's process group, ms. */
export const KILL_GRACE_MS = 2000;

/** A command tool as declared in `tools.commands.<name>`. */
export interface CommandToolSpec {
  command: string | string[];
  description: string;
  parameters?: Record<string, unknown>;
  timeout_seconds?: number;
  env?: Record<string, string>;
  pass_env?: string[];
}

/** Environment variable an argument is passed in: `HERMES_ARG_` + upper-cased name (non-alphanumerics → `_`). */
export function argEnvName(name: string): string {
  return `HERMES_ARG_${name.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

/**
 * A function tool running `spec.command`.
 * @param env - builds the process environment from the call's own variables
 * @throws ConfigError when `spec.parameters` is not a JSON Schema that can be enforced (the tool is named)
 */
export function commandTool(name: string, spec: CommandToolSpec, env: (turn: Record<string, string>) => Record<string, string>): AgentTool {
  const parameters: ToolParameters = spec.parameters ?? NO_PARAMETERS;
  const check = compileArgumentSchema(name, parameters);
  return {
    name,
    description: spec.description,
    parameters,
    groups: [name, 'commands'],
    timeoutMs: spec.timeout_seconds !== undefined ? spec.timeout_seconds * 1000 : undefined,
    async call(args, ctx) {
      const violation = check(args);
      if (violation !== undefined) throw new ToolError(violation, { kind: 'refused', tool: name });
      // HERMES_STEP_ID: the call's idempotency key, the same on a rerun after a crash (docs/RELIABILITY.md, "The step in doubt").
      const vars: Record<string, string> = { HERMES_SESSION_ID: ctx.sessionId, ...(ctx.stepId ? { HERMES_STEP_ID: ctx.stepId } : {}) };
      const values: Record<string, string> = Object.create(null) as Record<string, string>;
      const from: Record<string, string> = Object.create(null) as Record<string, string>;
      for (const [k, v] of Object.entries(args)) {
        const variable = argEnvName(k);
        if (from[variable] !== undefined) {
          throw new ToolError(`Arguments "${from[variable]}" and "${k}" would both be ${variable}; send one of them.`, {
            kind: 'refused',
            tool: name,
          });
        }
        from[variable] = k;
        values[k] = typeof v === 'string' ? v : JSON.stringify(v);
        vars[variable] = values[k]!;
      }
      const [file, argv] =
        typeof spec.command === 'string'
          ? ['/bin/sh', ['-c', spec.command]]
          : [spec.command[0]!, spec.command.slice(1).map((a) => fillPlaceholders(name, a, values))];
      await runBounded(name, file, argv, env(vars), ctx.signal, ctx.output, ctx.timeoutMs);
      return ctx.output;
    },
  };
}

/**
 * One argv element of a list command with its `{name}` placeholders filled in.
 * Option rule: an element that does not begin with `-` as the operator wrote it
 * must not begin with `-` once filled, or the program would read the model's
 * value as an option (`git log {ref}` with `--output=/etc/x`). Such a call is
 * refused; `--flag={value}` and values inside an element are fine.
 * @throws ToolError `refused`
 */
function fillPlaceholders(tool: string, element: string, values: Record<string, string>): string {
  const value = (k: string) => (Object.hasOwn(values, k) ? values[k]! : '');
  const filled = element.replace(/\{([a-zA-Z0-9_-]+)\}/g, (_m, k: string) => value(k));
  if (filled.startsWith('-') && !element.startsWith('-')) {
    // The culprit: the first of the element's leading placeholders whose value is not empty.
    const leading = /^(?:\{[a-zA-Z0-9_-]+\})+/.exec(element)?.[0] ?? '';
    const arg = [...leading.matchAll(/\{([a-zA-Z0-9_-]+)\}/g)].map((m) => m[1]!).find((k) => value(k) !== '') ?? 'argument';
    throw new ToolError(`Argument "${arg}" may not begin with "-": the command would read it as an option.`, { kind: 'refused', tool });
  }
  return filled;
}

/**
 * Run `file argv` without a shell; its stdout goes into `output` as it comes (all of it, in
 * bounded memory). Resolves when the process has ended.
 * @param deadlineMs - the call's timeout, ms (the signal aborts it then; the process backstop comes after it)
 * @throws ToolError `failed` (non-zero exit), `aborted`
 */
function runBounded(
  tool: string,
  file: string,
  argv: string[],
  env: Record<string, string>,
  signal: AbortSignal,
  output: ToolOutput,
  deadlineMs: number,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) {
      reject(new ToolError('The call was stopped.', { kind: 'aborted', tool }));
      return;
    }
    const child = spawnInGroup(file, argv, deadlineMs, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    let stopped = false;
    const onAbort = () => {
      stopped = true;
      stopGroup(child, signal.reason, KILL_GRACE_MS);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    child.stdout!.on('data', (d: Buffer) => output.push(d));
    child.stderr!.on('data', (d: Buffer) => {
      err = (err + d.toString('utf8')).slice(-1000);
    });
    child.on('error', (e) => {
      signal.removeEventListener('abort', onAbort);
      reject(new ToolError(`Could not run the command: ${e.message}`, { kind: 'failed', tool, cause: e }));
    });
    child.on('close', (code) => {
      signal.removeEventListener('abort', onAbort);
      endGroup(child); // what it left running ends with the call
      if (stopped) reject(new ToolError('The call was stopped.', { kind: 'aborted', tool }));
      else if (code !== 0)
        reject(new ToolError(`Exit code ${code}: ${err.trim().split('\n').slice(-3).join(' | ')}`, { kind: 'failed', tool }));
      else resolve();
    });
  });
}
