/**
 * The goal judge (docs/DESIGN.md §6): after each goal turn one auxiliary model call
 * answers `{"verdict":"done"|"blocked"|"continue"|"wait","reason":"…"}`.
 * A failed or malformed answer returns `undefined` (fail open: continue
 * within the turn budget, which bounds the spend).
 */
import { NO_SPEND, type ModelSpend } from '../../scheduler/model-spend.ts';
import type { GoalRecord, GoalVerdict } from '../../scheduler/goal/goal-state.ts';
import { parseVerdict } from '../turn-runners/judge-verdict.ts';
import { sessionEventSink } from '../turn-runners/turn-events.ts';
import type { WorkerDeps } from '../worker-deps.ts';

export const GOAL_JUDGE_PROMPT = [
  "You judge progress toward a standing goal after the agent's latest turn.",
  'Answer with one JSON object and nothing else:',
  '{"verdict": "done" | "blocked" | "continue" | "wait", "reason": "<one short sentence>"}',
  '"done": the goal is achieved. "blocked": it cannot go on without the user. "continue": another turn should follow now.',
  '"wait": nothing useful can be done until something outside the agent changes.',
  'When tools are offered, use them to check the goal against the current state instead of trusting the report.',
].join('\n');

/** @returns the verdict and reason (`verdict` undefined when the judge failed), and what the judge's calls cost */
export async function judgeGoal(
  deps: WorkerDeps,
  goal: GoalRecord,
  reply: string,
  signal: AbortSignal,
): Promise<{ verdict: GoalVerdict | undefined; reason: string; spend: ModelSpend }> {
  try {
    const res = await deps.runners.agent.complete(
      [{ role: 'user', content: `Goal: ${goal.text}\nLatest turn of the agent:\n${reply}` }],
      signal,
      goal.sessionId,
      {
        system: GOAL_JUDGE_PROMPT,
        jsonObject: true,
        surface: goal.origin.surface,
        onEvent: sessionEventSink(deps, goal.sessionId, { judge: 'goal' }),
        model: goal.model ?? undefined,
        purpose: 'judge',
        kind: 'goal',
      },
    );
    const v = parseVerdict(res.content, ['done', 'blocked', 'continue', 'wait']);
    if (v.verdict === 'error') return { verdict: undefined, reason: 'message' in v ? v.message : '', spend: res.spend };
    return { verdict: v.verdict as GoalVerdict, reason: 'reason' in v ? v.reason : '', spend: res.spend };
  } catch (err) {
    return { verdict: undefined, reason: (err as Error).message, spend: (err as { spend?: ModelSpend }).spend ?? NO_SPEND };
  }
}
