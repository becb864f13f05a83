/**
 * Token estimates of what a model call sends, for the context budget
 * (docs/CONTEXT.md). The provider's reported `prompt_tokens` is the measure;
 * an estimate is used only before a call (is it over the threshold?) and for
 * calls whose endpoint reports no usage (marked as estimated).
 *
 * The estimate is deliberately on the high side: `CHARS_PER_TOKEN` is 3
 * (English prose tokenizes at about 4 characters per token, code and logs at
 * 3–3.5), and each model's real counts correct it (`TokenCalibration`).
 */

/** Characters per token assumed before a model's own counts are known. */
export const CHARS_PER_TOKEN = 3;
/** Tokens a provider adds per message (role, separators). */
export const MESSAGE_OVERHEAD_TOKENS = 4;

/** The parts of a chat message that cost tokens. */
export interface EstimableMessage {
  role: string;
  content: string | null;
  tool_calls?: ReadonlyArray<{ name: string; arguments: string }>;
  name?: string;
}

/** Raw estimate of a text, tokens. */
export function estimateTextTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

/** Raw estimate of one message, tokens. */
export function estimateMessageTokens(m: EstimableMessage): number {
  let chars = (m.content ?? '').length + (m.name?.length ?? 0);
  for (const c of m.tool_calls ?? []) chars += c.name.length + c.arguments.length + 16;
  return MESSAGE_OVERHEAD_TOKENS + Math.ceil(chars / CHARS_PER_TOKEN);
}

/** Raw estimate of messages, tokens. */
export function estimateMessagesTokens(messages: readonly EstimableMessage[]): number {
  let n = 3; // reply priming
  for (const m of messages) n += estimateMessageTokens(m);
  return n;
}

/**
 * Per-model correction of the raw estimate from the provider's real counts:
 * after each call, `observe(raw, promptTokens)`; `scale(raw)` is then the raw
 * estimate times the last observed ratio (never below 1: the estimate may be
 * high, never low).
 */
export class TokenCalibration {
  private readonly ratios = new Map<string, number>();

  /** Record a call: its raw estimate and the provider's `prompt_tokens`. */
  observe(model: string, rawEstimate: number, promptTokens: number): void {
    if (rawEstimate <= 0 || promptTokens <= 0) return;
    this.ratios.set(model, Math.min(4, Math.max(1, promptTokens / rawEstimate)));
  }

  /** The corrected estimate of `rawEstimate` tokens for `model`. */
  scale(model: string, rawEstimate: number): number {
    return Math.ceil(rawEstimate * (this.ratios.get(model) ?? 1));
  }
}
