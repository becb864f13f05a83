/**
 * Token estimates of what a model call sends, for models whose tokenizer is not
 * known (`token-count.ts` counts the others exactly; docs/CONTEXT.md). The
 * provider's reported `prompt_tokens` is the measure; an estimate is used only
 * before a call (is it over the threshold?) and for calls whose endpoint
 * reports no usage (marked as estimated).
 *
 * The estimate is deliberately on the high side: `CHARS_PER_TOKEN` is 3
 * (English prose tokenizes at about 4 characters per token, code and logs at
 * 3–3.5), and each model's real counts correct it (`TokenCalibration`).
 */

/** Characters per token assumed before a model's own counts are known. */
export const CHARS_PER_TOKEN = 3;
/** Tokens a provider adds per message: its framing (3) and its role (1). */
export const MESSAGE_OVERHEAD_TOKENS = 4;

/** The parts of a chat message that cost tokens. */
export interface EstimableMessage {
  role: string;
  content: string | null;
  /** An assistant's tool calls (`id` as the model gave it). */
  tool_calls?: ReadonlyArray<{ id?: string; name: string; arguments: string }>;
  name?: string;
}

/** Raw estimate of a text, tokens. */
export function estimateTextTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
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
