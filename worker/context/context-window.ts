/**
 * The context window of each model, in tokens (docs/CONTEXT.md, "Windows").
 *
 * Precedence, highest first: a window learned from a provider's error (its
 * text names the limit: "maximum context length is 8192 tokens"); the
 * declared model's `context_window_tokens` (`agent.models.<name>`);
 * `agent.context_window_tokens`; the table below by model name; 128000.
 */
import { ownValue } from '../../scheduler/names/name-table.ts';

/** Window of a model that is in no table and no setting. */
export const DEFAULT_CONTEXT_WINDOW_TOKENS = 128_000;

/** Known windows by model name (first match wins; names are matched case-insensitively, after any `provider/` prefix). */
const KNOWN_WINDOWS: ReadonlyArray<readonly [RegExp, number]> = [
  [/^gpt-4\.1/, 1_047_576],
  [/^gpt-5/, 400_000],
  [/^gpt-4o/, 128_000],
  [/^gpt-4-turbo/, 128_000],
  [/^gpt-4-32k/, 32_768],
  [/^gpt-4(?![.o])/, 8_192],
  [/^gpt-3\.5-turbo/, 16_385],
  [/^o[1345](?:-|$)/, 200_000],
  [/^claude/, 200_000],
  [/^gemini-1\.5-pro/, 2_097_152],
  [/^gemini/, 1_048_576],
  [/^(?:meta-)?llama-?3\.[1-3]/, 128_000],
  [/^(?:meta-)?llama-?3/, 8_192],
  [/^mistral-large/, 128_000],
  [/^qwen2\.5/, 32_768],
  [/^deepseek/, 65_536],
];

/** The window of `model` from the table, or undefined. */
export function windowFromTable(model: string): number | undefined {
  const name = model.toLowerCase().split('/').pop() ?? '';
  return KNOWN_WINDOWS.find(([re]) => re.test(name))?.[1];
}

/** Provider error texts that name the window (OpenAI, vLLM, llama.cpp, Anthropic-compatible proxies). */
const WINDOW_IN_ERROR: readonly RegExp[] = [
  /maximum context length is ([\d,]+) tokens/i,
  /context (?:window|length|size)(?: limit)? (?:of|is) ([\d,]+)(?: tokens)?/i,
  /exceeds? (?:the )?(?:model's )?(?:maximum )?(?:context )?(?:limit|window) of ([\d,]+) tokens/i,
  /n_ctx[^\d]{0,10}([\d,]+)/i,
  /prompt is too long: [\d,]+ tokens > ([\d,]+) maximum/i,
];

/** The window named by a provider's error message, or undefined. */
export function windowFromError(message: string): number | undefined {
  for (const re of WINDOW_IN_ERROR) {
    const m = re.exec(message);
    if (m) {
      const n = Number(m[1]!.replace(/,/g, ''));
      if (Number.isInteger(n) && n >= 256) return n;
    }
  }
  return undefined;
}

/** Windows of one worker process: settings, the table, and what providers' errors taught. */
export class ContextWindows {
  private readonly learned = new Map<string, number>();

  /**
   * @param configuredTokens - `agent.context_window_tokens` (undefined: not set)
   * @param perModel - windows set per declared model, by model id
   */
  constructor(
    private readonly configuredTokens: number | undefined,
    private readonly perModel: Readonly<Record<string, number>> = {},
  ) {}

  /** The window of `model`, tokens. */
  windowOf(model: string): number {
    return (
      this.learned.get(model) ??
      ownValue(this.perModel, model) ??
      this.configuredTokens ??
      windowFromTable(model) ??
      DEFAULT_CONTEXT_WINDOW_TOKENS
    );
  }

  /** Use `tokens` as `model`'s window from now on. @returns true when it changed */
  learn(model: string, tokens: number): boolean {
    if (this.learned.get(model) === tokens) return false;
    this.learned.set(model, tokens);
    return true;
  }
}
