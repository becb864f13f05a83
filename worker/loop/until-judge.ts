/**
 * The `--until` judge (docs/DESIGN.md §4): after a tick, one auxiliary model call decides
 * whether the loop's condition holds. It answers JSON:
 * `{"verdict":"done"|"continue"|"blocked","reason":"…"}`.
 *
 * Fail open: a judge call that fails or answers nonsense returns `error`,
 * which keeps the loop going; `applyTick` pauses the loop after
 * `loops.max_consecutive_failures` failures in a row instead of spinning the budget away.
 */
import type { LoopRecord, UntilVerdict } from '../../scheduler/loop/loop-state.ts';
import { NO_SPEND, type ModelSpend } from '../../scheduler/model-spend.ts';
import { parseVerdict } from '../turn-runners/judge-verdict.ts';
import { sessionEventSink } from '../turn-runners/turn-events.ts';
import type { TurnSurfaces } from '../tools/tool.ts';
import type { WorkerDeps } from '../worker-deps.ts';

export const UNTIL_JUDGE_PROMPT = [
  'You judge whether a recurring task has reached its stop condition.',
  'Answer with one JSON object and nothing else:',
  '{"verdict": "done" | "continue" | "blocked", "reason": "<one short sentence>"}',
  '"done": the condition is met. "continue": not yet. "blocked": it cannot be met without the user.',
  'When tools are offered, use them to check the condition against the current state instead of trusting the report.',
].join('\n');

/**
 * Ask the judge, on the loop's model, within its context budget (the runner's). Never throws;
 * failures come back as `{ verdict: 'error' }`.
 * @returns the verdict and what the judge's calls cost
 */
export async function judgeUntil(
  deps: WorkerDeps,
  loop: LoopRecord,
  reply: string,
  signal: AbortSignal,
  /** The surfaces the tick answered to (`contextSurfaces`): the judge reads what its turn wrote. */
  surface: TurnSurfaces = loop.origin.surface,
): Promise<{ verdict: UntilVerdict; spend: ModelSpend }> {
  try {
    const res = await deps.runners.agent.complete(
      [{ role: 'user', content: `Task: ${loop.prompt}\nStop condition: ${loop.until}\nLatest report:\n${reply}` }],
      signal,
      loop.sessionId,
      // The judge has the turn's tools: "until the deploy is live" is judged on what a tool sees.
      {
        system: UNTIL_JUDGE_PROMPT,
        jsonObject: true,
        surface,
        onEvent: sessionEventSink(deps, loop.sessionId, { judge: 'until' }),
        model: loop.model ?? undefined,
        purpose: 'judge',
        kind: loop.kind,
      },
    );
    return { verdict: parseVerdict(res.content, ['done', 'continue', 'blocked']) as UntilVerdict, spend: res.spend };
  } catch (err) {
    return { verdict: { verdict: 'error', message: (err as Error).message }, spend: (err as { spend?: ModelSpend }).spend ?? NO_SPEND };
  }
}
