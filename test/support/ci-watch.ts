/**
 * The CI watch the loop tests of model calls run: a CI log of a chosen size, and a scripted model
 * that reads it with `read_file` at every wakeup and reports the build's status line.
 */
import type { LoopSpec } from '../../scheduler/loop/loop-service.ts';
import type { RecordedRequest, ScriptedReply } from './fake-openai.ts';

/** A CI log of about `kb` KB: numbered lines, the last one saying how the build stands. */
export function ciLog(kb: number, status: string): string {
  const lines: string[] = [];
  for (let size = 0, i = 0; size < kb * 1024; i++) {
    const line = `2026-12-01T02:${String(i % 60).padStart(2, '0')}:00Z [step ${i}] compiling module pkg/service-${i % 37}/handler.go ... ok (${(i * 7) % 1000} ms)`;
    lines.push(line);
    size += line.length + 1;
  }
  lines.push(`BUILD STATUS: ${status}`);
  return lines.join('\n');
}

/** The CI watcher: each wakeup reads the log with `read_file`, then reports what it saw. */
export function ciWatcher(path: string) {
  return (req: RecordedRequest): ScriptedReply => {
    if (req.tools.length === 0) return 'Summary: the CI log was read at every tick; the build was still running.';
    const last = req.messages[req.messages.length - 1]!;
    if (last.role === 'tool') return `Checked: ${/BUILD STATUS: (\w+)/.exec(last.content)?.[1] ?? 'unknown'}.`;
    return { toolCalls: [{ name: 'read_file', arguments: { path } }] };
  };
}

/** A loop of `prompt` every `intervalSeconds`, `times` ticks (null: no limit). */
export const loopSpec = (prompt: string, intervalSeconds: number, times: number | null): LoopSpec => ({
  prompt,
  intervalSeconds,
  times,
  until: null,
  notes: [],
  economy: {},
});
