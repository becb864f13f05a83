import { TOOL_SURFACES } from '../../scheduler/config/config.ts';
import { isToolOutput, type ToolSurface, type TurnSurfaces } from '../tools/tool.ts';
import type { TranscriptMessage } from '../../scheduler/session/session-store.ts';
import type { ChatMessage } from '../turn-runners/turn-runner.ts';

/**
 * The session transcript plus the new input, as runner messages. Tool
 * messages whose assistant call was trimmed off the front of the transcript
 * are dropped (a model refuses a `tool` message that answers no call).
 */
export function turnMessages(transcript: TranscriptMessage[], input: string): ChatMessage[] {
  const out: ChatMessage[] = [];
  const calls = new Set<string>();
  for (const m of transcript) {
    if (m.role === 'tool') {
      if (m.tool_call_id && calls.has(m.tool_call_id))
        out.push({ role: 'tool', tool_call_id: m.tool_call_id, content: m.content, ...(m.name ? { name: m.name } : {}) });
    } else if (m.role === 'assistant' && m.tool_calls?.length) {
      for (const c of m.tool_calls) calls.add(c.id);
      out.push({ role: 'assistant', content: m.content, tool_calls: m.tool_calls });
    } else {
      out.push({ role: m.role, content: m.content });
    }
  }
  // An assistant message whose tool results were trimmed would be refused too: drop it when a result is missing.
  const answered = new Set(out.flatMap((m) => (m.role === 'tool' ? [m.tool_call_id] : [])));
  const whole = out.filter((m) => m.role !== 'assistant' || !m.tool_calls || m.tool_calls.every((c) => answered.has(c.id)));
  return [...whole, { role: 'user', content: input }];
}

/** A turn's tool steps as transcript messages (between the input and the reply), written by `surface`'s turn. */
export function stepMessages(steps: ChatMessage[], at: number, source: string, surface?: string): TranscriptMessage[] {
  const from = surface ? { surface } : {};
  return steps.flatMap((m): TranscriptMessage[] => {
    if (m.role === 'tool')
      return [{ role: 'tool', content: m.content, at, source, tool_call_id: m.tool_call_id, ...(m.name ? { name: m.name } : {}), ...from }];
    if (m.role === 'assistant')
      return [{ role: 'assistant', content: m.content, at, source, ...(m.tool_calls ? { tool_calls: m.tool_calls } : {}), ...from }];
    return [];
  });
}

/**
 * Whether `context` holds text a tool brought in: a tool's result (`isToolOutput`), or a compaction
 * summary standing for one. What the agent schedules with it in its context is marked
 * (`AgentCreator.from_tool_output`; docs/TOOLS.md, "The agent schedules").
 */
export function holdsToolOutput(context: readonly TranscriptMessage[]): boolean {
  return context.some((m) => isToolOutput(m) || m.tool_output === true);
}

/**
 * Provenance (docs/TOOLS.md, "Provenance"): the surfaces a turn answers to — its own first, then
 * every other surface whose text is in the context it sends. Text a less trusted surface wrote
 * (an `/api` loop's prompt, a Telegram message) can thus never drive a tool that only a more
 * trusted one may use: the toolbox offers and runs a tool only when each of these surfaces may.
 */
export function contextSurfaces(own: ToolSurface, context: readonly TranscriptMessage[]): TurnSurfaces {
  const seen = new Set<string>([own]);
  for (const m of context) {
    if (m.surface) seen.add(m.surface);
    for (const s of m.surfaces ?? []) seen.add(s);
  }
  const list = [...seen].filter((s): s is ToolSurface => (TOOL_SURFACES as readonly string[]).includes(s));
  return list.length === 1 ? list[0]! : list;
}
