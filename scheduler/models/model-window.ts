/**
 * The context window of a model at an endpoint, in tokens, and what a provider's refusal for
 * length teaches about it (docs/CONTEXT.md "Windows" and "Refusals"). Pure: the stores keep the
 * learned windows (`model-state-store.ts`), the agent runner applies the rule.
 *
 * Precedence, highest first: a window learned from a refusal at that endpoint; the declared
 * model's `context_window_tokens` (`agent.models.<name>`); `agent.context_window_tokens`; the
 * table of known models (`known-windows.ts`); 128000.
 */
import { DEFAULT_CONTEXT_WINDOW_TOKENS, windowFromTable } from './known-windows.ts';

/** How a learned window was learned: the refusal `stated` it, or it was `halved` from a refusal that named none. */
export const LEARNED_HOW = ['stated', 'halved'] as const;
export type LearnedHow = (typeof LEARNED_HOW)[number];

/** A window learned from a provider's refusal, stored per endpoint and model and shared by the fleet. */
export interface LearnedWindow {
  /** Record version (`putVersioned`). */
  version: number;
  tokens: number;
  how: LearnedHow;
  /** Whose words the refusal was in (`openai`, `llama.cpp`, …; `general` for the general rule). */
  provider: string;
  /** When it was learned, epoch ms. */
  at: number;
  /** The start of the refusal's text, as the endpoint said it. */
  said: string;
}

/** Where a model's window comes from. */
export const WINDOW_SOURCES = ['learned', 'configured', 'known', 'default'] as const;
export type WindowSource = (typeof WINDOW_SOURCES)[number];

/** A model's window and its source. */
export interface ResolvedWindow {
  tokens: number;
  source: WindowSource;
}

/**
 * The window of `model` by the precedence of the module comment.
 * @param input.configuredTokens - the declared model's setting, else `agent.context_window_tokens`
 */
export function resolveWindow(input: { model: string; learned?: LearnedWindow; configuredTokens?: number }): ResolvedWindow {
  if (input.learned) return { tokens: input.learned.tokens, source: 'learned' };
  if (input.configuredTokens !== undefined) return { tokens: input.configuredTokens, source: 'configured' };
  const known = windowFromTable(input.model);
  return known !== undefined ? { tokens: known, source: 'known' } : { tokens: DEFAULT_CONTEXT_WINDOW_TOKENS, source: 'default' };
}

/**
 * What is stored when `proposal` is learned over `current` (two workers may learn at once): a
 * stated window replaces whatever was there (the provider said it); a halved one replaces only a
 * larger window, so halvings keep going down and never undo each other.
 */
export function mergeLearned(current: LearnedWindow | undefined, proposal: LearnedWindow): LearnedWindow {
  if (!current || proposal.how === 'stated' || proposal.tokens < current.tokens) return { ...proposal, version: current?.version ?? 0 };
  return current;
}

/** What one refusal teaches, and the budget of the call sent again. */
export interface RefusalLesson {
  /** The model's window from now on. */
  windowTokens: number;
  how: LearnedHow;
  /** Tokens the request sent again may take. */
  budgetTokens: number;
}

/**
 * The refusal rule. A refusal that names the window (`statedWindowTokens`) teaches it as it is.
 * One that names none teaches that the window is at most half of what was refused: the window
 * becomes half of the refused request (`sentTokens`), never more than it was and never below
 * `floorTokens` (`agent.min_context_window_tokens`), so each later refusal halves it again. Either
 * way the request is sent again at most half its refused size, within `fitShare` of the new window.
 *
 * @returns undefined when the refused request was already no larger than the smallest window to
 *   believe (the floor, or a stated window under it): the call fails instead of shrinking further
 */
export function afterRefusal(input: {
  windowTokens: number;
  sentTokens: number;
  statedWindowTokens?: number;
  floorTokens: number;
  fitShare: number;
}): RefusalLesson | undefined {
  const { windowTokens, sentTokens, statedWindowTokens, floorTokens, fitShare } = input;
  const stated = statedWindowTokens !== undefined;
  const next = stated ? statedWindowTokens : Math.max(floorTokens, Math.min(windowTokens, Math.floor(sentTokens / 2)));
  if (sentTokens <= Math.min(floorTokens, next)) return undefined;
  return {
    windowTokens: next,
    how: stated ? 'stated' : 'halved',
    budgetTokens: Math.min(Math.floor(fitShare * next), Math.floor(sentTokens / 2)),
  };
}
