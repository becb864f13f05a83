/**
 * `--watch`: the one operator-declared check a schedule runs before its turn
 * (docs/CONTEXT.md, "Watches"). The check is a tool call through the toolbox,
 * with the schedule's surface (`tools.allow_from` applies at every run, as
 * when the schedule was created: `scheduler/economy/economy-check.ts`).
 *
 * Policy: the output's digest is compared with the digest kept from the last
 * tick that ran the check. Equal → the tick completes as `unchanged` with no
 * model call. Different, or the first tick → the turn runs with the output in
 * its input. A check that fails is "changed" (its error text is the output):
 * the agent sees the failure and can report it.
 */
import { createHash } from 'node:crypto';
import { parseWatch } from '../../scheduler/economy/economy-check.ts';
import type { TurnSurfaces } from '../tools/tool.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/** What a check gave. */
export interface WatchResult {
  /** sha256 of the output, hex. */
  digest: string;
  /** The output as the toolbox returned it (cut to `tools.max_result_bytes`), or the error text. */
  output: string;
  error?: string;
}

/** Run the check `spec` for a schedule of `sessionId` created from `surface`. Never throws. */
export async function runWatch(
  deps: Pick<WorkerDeps, 'tools'>,
  spec: string,
  ctx: { sessionId: string; surface: TurnSurfaces; signal: AbortSignal },
): Promise<WatchResult> {
  let tool: string;
  let args: Record<string, unknown>;
  try {
    ({ tool, args } = parseWatch(spec));
  } catch (err) {
    const output = `Error: ${(err as Error).message}`;
    return { digest: digestOf(output), output, error: (err as Error).message };
  }
  const r = await deps.tools.call(tool, JSON.stringify(args), ctx);
  return { digest: digestOf(r.content), output: r.content, ...(r.error ? { error: r.error.message } : {}) };
}

/** The input section that shows the agent what the watch saw. */
export function watchSection(spec: string, result: WatchResult, first: boolean): string {
  const why = first ? 'first run of the watched check' : 'the watched check changed since the last tick';
  return `\n\n[Watch ${spec}: ${why}. Its output:]\n${result.output}`;
}

function digestOf(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
