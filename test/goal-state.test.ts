/** Pure goal state: token budgets and spend totals (docs/CONTEXT.md, "Budgets"). */
import { describe, expect, it } from 'vitest';
import { applyGoalTurn, createGoal, resumeGoal } from '../scheduler/goal/goal-state.ts';

const spend = (inputTokens: number, outputTokens: number) => ({
  calls: 2,
  inputTokens,
  outputTokens,
  cachedTokens: 0,
  lastInputTokens: inputTokens,
  estimated: false,
});
const goal = (economy = {}) =>
  createGoal({ goalId: 'g', sessionId: 's', text: 'ship it', maxTurns: 20, origin: { surface: 'cli' }, now: 0, economy });
const turn = (n: number, extra = {}) => ({
  turnId: `t${n}`,
  now: n,
  verdict: 'continue' as const,
  reason: '',
  maxConsecutiveFailures: 3,
  ...extra,
});

describe('goal spend and budgets', () => {
  it('keeps the totals and pauses at --max-tokens with the spend named; resume gives a fresh allowance', () => {
    let g = goal({ maxTokens: 1000, model: 'cheap' });
    expect(g).toMatchObject({ model: 'cheap', maxTokens: 1000, budgetTokens: 0 });
    let r = applyGoalTurn(g, turn(1, { spend: spend(600, 20) }));
    expect(r.outcome.kind).toBe('continue');
    r = applyGoalTurn(r.goal, turn(2, { spend: spend(400, 30) }));
    expect(r.outcome).toEqual({
      kind: 'paused',
      reason: expect.stringMatching(
        /^token budget of 1,000 reached \(--max-tokens\): 1,050 tokens since it was set or resumed; in all 4 model calls, 1,000 tokens in, 50 out \(last input 400\)\. \/goal resume gives a fresh allowance$/,
      ),
    });
    g = resumeGoal(r.goal, 3, 20);
    expect([g.status, g.budgetTokens, g.spend!.calls]).toEqual(['active', 0, 4]);
  });

  it('a turn over agent.max_tokens_per_turn pauses the goal at once, its spend named', () => {
    const r = applyGoalTurn(
      goal(),
      turn(1, {
        verdict: undefined,
        reason: 'This turn used 9,000 tokens, over agent.max_tokens_per_turn (8,000).',
        overTurnBudget: { usedTokens: 9_000, limitTokens: 8_000 },
      }),
    );
    expect(r.outcome).toEqual({
      kind: 'paused',
      reason: 'one turn used 9,000 tokens, over agent.max_tokens_per_turn (8,000). /goal resume continues',
    });
  });
});
