/**
 * The turn runner contract (docs/DESIGN.md §3): a turn takes the session's current
 * transcript plus one new input and produces a reply — for an agent turn,
 * possibly after calling the operator's tools (their calls and results are
 * returned as `steps`, so they go into the transcript with the reply).
 */
import type { TurnKind, TurnSurfaces } from '../tools/tool.ts';
import type { Origin } from '../../scheduler/session/origin.ts';
import type { ModelSpend, TurnBudgetOverrun } from '../../scheduler/model-spend.ts';
import type { CompactionReport } from '../context/compaction.ts';
import type { LearnedHow } from '../../scheduler/models/model-window.ts';
import type { JournalEntry } from '../../scheduler/journal/journal-entry.ts';
import type { TurnReplay } from '../../scheduler/journal/turn-replay.ts';

/** A tool call the model asked for. `arguments` is the model's JSON text. */
export interface ToolCallRecord {
  id: string;
  name: string;
  arguments: string;
}

/** A chat message as sent to a runner (the OpenAI Chat Completions roles). */
export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string; tool_calls?: ToolCallRecord[] }
  | { role: 'tool'; content: string; tool_call_id: string; name?: string };

/** Something visible that happened inside a turn (docs/DESIGN.md §3: tool calls are part of the event stream). */
export type TurnEvent =
  | { type: 'tool.called'; data: { callId: string; name: string; arguments: string } }
  | {
      type: 'tool.result';
      data: { callId: string; name: string; arguments: string; ms: number; bytes: number; error?: string; truncated?: boolean };
    }
  /** One model call: its usage (estimated when the endpoint reported none), or the error it ended with. */
  | { type: 'model.called'; data: ModelCallEvent }
  /** What a call was about to send was compacted to fit the model's window (docs/CONTEXT.md). */
  | { type: 'context.compacted'; data: CompactionReport & { scope: 'call' | 'transcript'; model: string; windowTokens: number } }
  /** The provider refused a request for length; what it taught (docs/CONTEXT.md "Refusals"). The request is sent again. */
  | {
      type: 'model.refused';
      data: {
        model: string;
        endpoint: string;
        /** Whose words (`refusal-shapes.ts`). */
        provider: string;
        status: number;
        /** The refused request's size: the provider's count, else the estimate. */
        sentTokens: number;
        /** The model's window from now on. */
        windowTokens: number;
        how: LearnedHow;
        said: string;
      };
    }
  /** A call skipped a model whose circuit breaker is open (docs/CONTEXT.md "Circuit breaker"). */
  | { type: 'model.skipped'; data: { model: string; endpoint: string; probeAt: number; failures: number } }
  /** A model's circuit breaker opened (calls skip it until `probeAt`) or closed (a call answered). */
  | { type: 'model.breaker'; data: { model: string; endpoint: string; state: 'open' | 'closed'; failures?: number; probeAt?: number } };

/** The data of a `model.called` event. */
export type ModelCallEvent = {
  /** The model id sent to the endpoint. */
  model: string;
  /** Why the call was made: the turn itself, a judge, a compaction summary. */
  purpose: ModelCallPurpose;
  inputTokens: number;
  outputTokens: number;
  /** Input tokens the provider served from its prompt cache (part of `inputTokens`; `usage.prompt_tokens_details.cached_tokens`). */
  cachedTokens: number;
  /** The endpoint reported no usage; the figures are estimates. */
  estimated: boolean;
  /**
   * What the request was counted at before it was sent (`worker/context/token-count.ts`), to set
   * beside `inputTokens`; absent on a call that failed.
   */
  estimatedInputTokens?: number;
  ms: number;
  /** Set when the call failed for good (after the client's retries and any fallback models). */
  error?: string;
};

/** Why a model call is made. */
export type ModelCallPurpose = 'turn' | 'judge' | 'summary';

/**
 * The journal of an occurrence's agent turn (docs/RELIABILITY.md, "A turn resumes from its journal"):
 * what earlier runs of the turn recorded, and where this run records each step before the next starts.
 */
export interface TurnJournal {
  /** The occurrence the turn is for: each tool call's `HERMES_STEP_ID` is derived from it (`stepId`). */
  occurrenceId: string;
  /** What earlier runs recorded (`NO_REPLAY` for a first run). */
  replay: TurnReplay;
  /**
   * Record one step; resolves once Redis holds it (the runner starts the next step only then).
   * @throws TurnError `network` when it could not be written
   */
  append(entry: JournalEntry): Promise<void>;
}

/** One turn to run. */
export interface TurnRequest {
  sessionId: string;
  /** The transcript so far, then the new input as the last `user` message. */
  messages: ChatMessage[];
  /** Aborted by a drain deadline or a user interrupt; runners stop promptly (running tools included). */
  signal: AbortSignal;
  /** Extra environment for command runners (e.g. `HERMES_TICK`). Never secrets. */
  env?: Record<string, string>;
  /** Where the turn's input came from; decides which tools it may use (`tools.allow_from`). Default `cli`. */
  surface?: TurnSurfaces;
  /** Called for each tool call and result as they happen (events for clients); not awaited. Errors and rejections are ignored. */
  onEvent?: (event: TurnEvent) => unknown;
  /** Called with each piece of reply text as the model streams it (the model is then called with `stream: true`). */
  onDelta?: (text: string) => void;
  /** A model the operator declared (`agent.models.<name>`); default the primary `agent.model`. */
  model?: string;
  /**
   * What the turn is: metrics labels (`hermes_model_*{kind}`), and what a tool acting for the turn
   * may do (the `schedules` tool: `tools.schedules.allow_from`). Default `message`.
   */
  kind?: TurnKind;
  /** Where its input came from: a message's origin, or the loop's, goal's or cron job's (tools acting for the turn use it). */
  origin?: Origin;
  /** A tick of a self-paced loop: the agent may set the delay to the next tick (`TurnOutput.nextTickSeconds`). */
  selfPaced?: boolean;
  /**
   * `messages` hold text a tool brought in that is not a `tool` message: a compaction summary standing for
   * tool results, a `--watch` check's output in the input (`holdsToolOutput`). The runner adds the `tool`
   * messages it is given and the results of the turn's own calls (`ToolTurn.toolOutput`).
   */
  toolOutput?: boolean;
  /**
   * The occurrence's journal (loop ticks and cron runs): recorded model answers are not asked again,
   * recorded tool results are used, a call in doubt is run again or reported by its tool's policy.
   */
  journal?: TurnJournal;
}

/** What a turn produced. */
export interface TurnOutput {
  /** The final reply text ('' when the model returned none). */
  reply: string;
  /** Tool-calling steps before the reply, in order: assistant messages with `tool_calls`, then `tool` results. */
  steps: ChatMessage[];
  /** Token usage summed over the turn's model calls, when reported. */
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  /** What the turn's model calls cost; absent = it made none (a command turn). */
  spend?: ModelSpend;
  /** A self-paced loop's tick: the delay to the next tick its agent asked for, seconds (not clamped yet). */
  nextTickSeconds?: number;
  /** The turn's last call passed `agent.max_tokens_per_turn`: its answer is `reply`; the schedule pauses after it. */
  overBudget?: TurnBudgetOverrun;
}

/**
 * Produces a reply for a turn.
 * @throws TurnError (kind `network` when the model was never reached, `model`,
 *   `timeout`, `aborted`, `command`, `config`)
 */
export interface TurnRunner {
  readonly kind: 'agent' | 'command';
  run(request: TurnRequest): Promise<TurnOutput>;
}
