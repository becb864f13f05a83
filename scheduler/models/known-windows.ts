/**
 * The context windows of models known by name, in tokens: the table a window falls back to when
 * no refusal taught one and no setting names one (precedence: `model-window.ts`).
 */

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
