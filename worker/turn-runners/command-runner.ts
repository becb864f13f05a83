/**
 * The `command` runner: runs a configured shell command with a timeout; its
 * stdout is the reply. Only trusted surfaces (CLI, config) create command
 * turns; chat and `/v1` input never can (docs/DESIGN.md §3).
 *
 * The command gets the turn's new input on stdin. Its environment is the one
 * `commandEnv` (`../command-env.ts`) builds: the minimal base plus what the
 * operator listed, given to the constructor, then the request's `env` and
 * `HERMES_SESSION_ID` — never the worker's own environment. It runs in a
 * process group of its own; on timeout or abort the whole group gets SIGTERM,
 * then SIGKILL after 2 s; a backstop ends the group even when the worker has
 * died (`../process-group.ts`).
 *
 * Given the occurrence's journal, the command is its one step (docs/RELIABILITY.md, "A command turn
 * is one step"): `started` is recorded before it runs and its result after, so a later run of the
 * occurrence uses a recorded result, and finds a command that started with no result in doubt —
 * run again or reported by `worker.command_turn_on_doubt`.
 */
import { TurnError } from '../../scheduler/errors/turn-error.ts';
import { commandEnv } from '../runtime/command-env.ts';
import { endGroup, spawnInGroup, stopGroup } from '../runtime/process-group.ts';
import { callState, stepId, type OnDoubt } from '../../scheduler/journal/turn-replay.ts';
import type { TurnJournal, TurnOutput, TurnRequest, TurnRunner } from './turn-runner.ts';

/** Bytes of stdout kept (the rest is cut with a note). */
export const MAX_OUTPUT_BYTES = 256 * 1024;

/** The journal's name of a command turn's one step (its `call` is 1). */
const COMMAND_STEP = { call: 1, id: 'command', name: 'command' } as const;

/** Runs a turn as a shell command in its own process group (see the rules above). */
export class CommandRunner implements TurnRunner {
  readonly kind = 'command' as const;

  private readonly baseEnv: Record<string, string>;
  private readonly cwd: string | undefined;
  private readonly onDoubt: OnDoubt;

  /**
   * @param command - shell command line (`/bin/sh -c`)
   * @param timeoutMs - kill the command after this many milliseconds
   * @param options.env - the command's environment before the turn's variables, as built by
   *   `commandEnv` (default: the minimal base of an empty environment, i.e. only `PATH`)
   * @param options.cwd - working directory (default the process's)
   * @param options.onDoubt - a command in doubt by the journal: run again (default) or reported
   */
  constructor(
    readonly command: string,
    readonly timeoutMs: number,
    options: { env?: Record<string, string>; cwd?: string; onDoubt?: OnDoubt } = {},
  ) {
    this.baseEnv = options.env ?? commandEnv({});
    this.cwd = options.cwd;
    this.onDoubt = options.onDoubt ?? 'rerun';
  }

  /**
   * @returns trimmed stdout (or the result its journal recorded)
   * @throws TurnError `timeout`, `aborted` or `command` (non-zero exit, with stderr's tail; or, in doubt
   *   under `report`, its outcome unknown); `network` when its journal cannot be written
   */
  async run(request: TurnRequest): Promise<TurnOutput> {
    const { journal } = request;
    if (!journal) return { reply: await this.runCommand(request), steps: [] };
    return { reply: await this.runJournaled(request, journal), steps: [] };
  }

  private async runJournaled(request: TurnRequest, journal: TurnJournal): Promise<string> {
    const step = callState(journal.replay, COMMAND_STEP.call);
    const { sessionId } = request;
    if (step.state === 'done') {
      if (step.result.error !== undefined) throw new TurnError(step.result.error, { kind: 'command', sessionId });
      return step.result.content;
    }
    if (step.state === 'in-doubt' && this.onDoubt === 'report') {
      throw new TurnError(
        "The command's outcome is unknown: it started on a worker that stopped (or lost its lock) before it " +
          'finished, and it was not run again (worker.command_turn_on_doubt: report).',
        { kind: 'in-doubt', sessionId },
      );
    }
    if (request.signal.aborted) throw new TurnError('The command was aborted.', { kind: 'aborted', sessionId });
    await journal.append({ type: 'started', ...COMMAND_STEP, at: Date.now() });
    const env = { ...request.env, HERMES_STEP_ID: stepId(journal.occurrenceId, COMMAND_STEP.call) };
    let reply: string;
    try {
      reply = await this.runCommand({ ...request, env });
    } catch (err) {
      // An exit code or a timeout is the command's outcome; an abort cut it off, which leaves it in doubt.
      if (err instanceof TurnError && (err.kind === 'command' || err.kind === 'timeout')) {
        await journal.append({ type: 'result', ...COMMAND_STEP, content: '', error: err.message, at: Date.now() });
      }
      throw err;
    }
    await journal.append({ type: 'result', ...COMMAND_STEP, content: reply, at: Date.now() });
    return reply;
  }

  private async runCommand(request: TurnRequest): Promise<string> {
    // An abort that came first: no process at all (its listener below would never fire).
    if (request.signal.aborted) throw new TurnError('The command was aborted.', { kind: 'aborted', sessionId: request.sessionId });
    const input = request.messages[request.messages.length - 1]?.content ?? '';
    return await new Promise<string>((resolve, reject) => {
      // Its own process group, so a timeout or abort reaches everything the command started;
      // the backstop ends it even when this worker dies first (../process-group.ts).
      const child = spawnInGroup('/bin/sh', ['-c', this.command], this.timeoutMs, {
        cwd: this.cwd,
        env: { ...this.baseEnv, ...request.env, HERMES_SESSION_ID: request.sessionId },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      let settled = false;
      let killReason: 'timeout' | 'aborted' | undefined;
      const kill = (reason: 'timeout' | 'aborted') => {
        killReason ??= reason;
        stopGroup(child, reason === 'aborted' ? request.signal.reason : undefined, 2000);
      };
      const timer = setTimeout(() => kill('timeout'), this.timeoutMs);
      const onAbort = () => kill('aborted');
      request.signal.addEventListener('abort', onAbort, { once: true });
      child.stdout!.on('data', (d: Buffer) => {
        if (out.length < MAX_OUTPUT_BYTES) out += d.toString('utf8');
      });
      child.stderr!.on('data', (d: Buffer) => {
        err = (err + d.toString('utf8')).slice(-2000);
      });
      child.stdin!.on('error', () => {});
      child.stdin!.end(input);
      const done = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        request.signal.removeEventListener('abort', onAbort);
        fn();
      };
      child.on('error', (e) =>
        done(() =>
          reject(new TurnError(`Could not run the command: ${e.message}`, { kind: 'command', sessionId: request.sessionId, cause: e })),
        ),
      );
      child.on('close', (code) =>
        done(() => {
          endGroup(child); // what it left running ends with the turn
          if (killReason === 'timeout') {
            reject(
              new TurnError(`The command timed out after ${this.timeoutMs / 1000}s.`, { kind: 'timeout', sessionId: request.sessionId }),
            );
          } else if (killReason === 'aborted') {
            reject(new TurnError('The command was aborted.', { kind: 'aborted', sessionId: request.sessionId }));
          } else if (code !== 0) {
            reject(
              new TurnError(`The command exited with code ${code}: ${err.trim().split('\n').slice(-3).join(' | ')}`, {
                kind: 'command',
                sessionId: request.sessionId,
              }),
            );
          } else {
            const cut = out.length >= MAX_OUTPUT_BYTES ? '\n[output cut]' : '';
            resolve(out.trim() + cut);
          }
        }),
      );
    });
  }
}
