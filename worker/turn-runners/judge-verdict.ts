/**
 * A judge's answer: the JSON verdict an auxiliary judge call returns (the `--until` judge:
 * `worker/loop/until-judge.ts`; the goal judge: `worker/chat/goal-judge.ts`).
 */
/**
 * Parse a judge's JSON answer (tolerates code fences and text around the object).
 * @returns the verdict, or `{ verdict: 'error' }` when it is not one of `allowed`
 */
export function parseVerdict(
  text: string,
  allowed: readonly string[],
): { verdict: string; reason: string } | { verdict: 'error'; message: string } {
  const match = /\{[\s\S]*\}/.exec(text);
  if (!match) return { verdict: 'error', message: 'the judge did not answer JSON' };
  try {
    const obj = JSON.parse(match[0]) as { verdict?: unknown; reason?: unknown };
    const verdict = typeof obj.verdict === 'string' ? obj.verdict.toLowerCase().trim() : '';
    if (!allowed.includes(verdict)) return { verdict: 'error', message: `the judge answered an unknown verdict "${String(obj.verdict)}"` };
    return { verdict, reason: typeof obj.reason === 'string' ? obj.reason : '' };
  } catch {
    return { verdict: 'error', message: 'the judge answered malformed JSON' };
  }
}
