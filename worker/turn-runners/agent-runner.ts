/**
 * The `agent` runner: an OpenAI-compatible Chat Completions endpoint through
 * the official `openai` client (works with any compatible server).
 *
 * A turn is a tool-calling loop (docs/DESIGN.md §3): the model gets the tools the
 * operator declared for the turn's surface; every `tool_calls` answer is run
 * (the calls of one answer concurrently), the results are appended as `tool`
 * messages and the model is called again, until it answers without tool calls.
 *
 * Limits: `agent.max_tool_calls` calls per turn — a call past it is refused
 * with a message the model sees, and the model is then asked to answer
 * without tools (`tool_choice: none`); a model that still keeps calling ends
 * the turn with an error after `EXTRA_ROUNDS_AFTER_LIMIT` more rounds. Each
 * call has the toolbox's timeout and result cap. The whole turn, tools
 * included, is bounded by `agent.timeout_seconds`; the turn's AbortSignal
 * (drain, interrupt, stop) stops the model call or the running tools at once.
 *
 * Every model call (the turn's, a judge's, a compaction summary's) goes the
 * same way (docs/DESIGN.md §12, docs/CONTEXT.md):
 *   - Models: the primary `agent.model`, or a model the operator declared
 *     (`agent.models.<name>`, each with its own client) named by the request.
 *   - Fit: before it is sent, the request (system prompt, messages, tool
 *     definitions; counted with the model's tokenizer when known, else
 *     estimated and calibrated by its reported counts: `context/token-count.ts`)
 *     must fit `CALL_FIT_SHARE` of the model's window; if not, the conversation is
 *     compacted without a model call (`compactMessages`: old tool results
 *     stubbed, then older messages cut and dropped) — what the model has not
 *     seen yet is cut last, keeping its head and its tail. Nothing over the
 *     window is sent.
 *     The window is the one the fleet learned from the model's refusals at its
 *     endpoint, else configured, known or default (`scheduler/models/model-window.ts`).
 *   - Refusals: a provider that still refuses for length, in any provider's
 *     words (../context/refusal-shapes.ts), teaches the window by the refusal
 *     rule (`afterRefusal`: the number it names, else half of what it refused),
 *     stored for every worker; the call is compacted to the rule's budget and
 *     sent again, until the provider takes it or the rule's floor is reached.
 *   - Retries: the client's own (`agent.max_retries`; see model-transport.ts
 *     for how its waits end with the turn). A call still failing with a
 *     transient error goes to each of `agent.fallback_models` in order; the
 *     model that answered keeps the rest of the turn.
 *   - Circuit breaker: each endpoint and model's calls that fail for good open
 *     its breaker after `agent.breaker_failure_threshold` in a row; an
 *     open breaker sends calls straight to the fallbacks (or fails the call at
 *     once, naming when it probes) until one probe call after the cool-down
 *     (`scheduler/models/circuit-breaker.ts`).
 *   - Measure: each call ends with a `model.called` event (its usage, or an
 *     estimate when the endpoint reported none), the `hermes_model_*`
 *     metrics, and its share of the turn's `spend`; past
 *     `agent.max_tokens_per_turn` the turn stops: the answer of the call
 *     that passed it is returned with `overBudget` (it was paid for); a call
 *     that passed it asking for tools ends the turn with TurnError `budget`
 *     (docs/CONTEXT.md, "Budgets").
 */
import { setMaxListeners } from 'node:events';
import { answeredText } from '../../scheduler/errors/upstream-text.ts';
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIUserAbortError, APIError } from 'openai';
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import { Stream } from 'openai/streaming';
import { TurnError } from '../../scheduler/errors/turn-error.ts';
import type { HermesMetrics } from '../../scheduler/metrics.ts';
import type { FinishReason, ModelParams } from '../../scheduler/model-params.ts';
import { NO_SPEND, sumSpend, totalTokens, type ModelSpend, type TurnBudgetOverrun } from '../../scheduler/model-spend.ts';
import { configDefaults } from '../../scheduler/config/config.ts';
import { turnOverrunText } from '../../scheduler/economy/token-budget.ts';
import { ownValue } from '../../scheduler/names/name-table.ts';
import { compactMessages, type CompactableMessage } from '../context/compaction.ts';
import type { Admission, BreakerRecord } from '../../scheduler/models/circuit-breaker.ts';
import { MemoryModelState, endpointOf, type ModelRef, type ModelStateStore } from '../../scheduler/models/model-state-store.ts';
import { afterRefusal, resolveWindow, type LearnedWindow, type ResolvedWindow } from '../../scheduler/models/model-window.ts';
import { countRequestTokens, tokenCounterFor, type TokenCounter } from '../context/token-count.ts';
import { TokenCalibration, type EstimableMessage } from '../context/token-estimate.ts';
import { ATTR, SPAN, tracing } from '../../scheduler/telemetry/tracing.ts';
import type { ToolCallScope, Toolbox } from '../tools/toolbox.ts';
import { callState, stepId } from '../../scheduler/journal/turn-replay.ts';
import { isToolOutput, type ToolTurn, type TurnSurfaces } from '../tools/tool.ts';
import { modelFetch } from './model-fetch.ts';
import {
  callFetchOptions,
  ContextRefusal,
  type CallFetchOptions,
  contextRefusalOf,
  isTransient,
  retryingFetch,
  untilAborted,
} from './model-transport.ts';
import { ModelHealth } from './model-health.ts';
import { MalformedAnswerError, StreamAssembler, StreamAssemblyError, checkCompletion } from './model-answer.ts';
import type {
  ChatMessage,
  ModelCallEvent,
  ModelCallPurpose,
  ToolCallRecord,
  TurnEvent,
  TurnJournal,
  TurnOutput,
  TurnRequest,
  TurnRunner,
} from './turn-runner.ts';

/** A model the operator declared (`agent.models.<name>`). */
export interface DeclaredModel {
  /** The model id sent to its endpoint. */
  model: string;
  /** Its endpoint; default the agent's. */
  baseUrl?: string;
  /** Its key; default the agent's. */
  apiKey?: string;
  contextWindowTokens?: number;
}

/** Settings of the agent runner (from `agent.*`). */
export interface AgentRunnerOptions {
  /** Endpoint root, e.g. `http://127.0.0.1:8000/v1`. */
  baseUrl: string | undefined;
  apiKey: string | undefined;
  model: string;
  /** Per model call, and for a whole turn with its tool calls, seconds. */
  timeoutSeconds: number;
  /** Tool calls one turn may make (`agent.max_tool_calls`; unset: its default in the config schema). */
  maxToolCalls?: number;
  /** Declared models by name (`agent.models`). */
  models?: Readonly<Record<string, DeclaredModel>>;
  /** Declared model names tried in order when a call still fails after its retries (`agent.fallback_models`). */
  fallbackModels?: readonly string[];
  /** `agent.context_window_tokens` (unset: the table of known models, else 128000). */
  contextWindowTokens?: number;
  /** `agent.compaction` (unset fields: its defaults, `configDefaults().agent.compaction`). */
  compaction?: {
    /** Share of the window at or past which the worker compacts a transcript before a turn. */
    threshold?: number;
    /** Share of the window a compaction brings the transcript down to. */
    target?: number;
    keepRecentMessages?: number;
    /** A declared name or a model id of the primary endpoint that writes summaries; unset = the turn's model. */
    model?: string;
  };
  /**
   * Share of a message cut to fit a window kept from its head, the rest from its tail
   * (`tools.result_head_share`; the big-result rule, `../tools/tool-output.ts`). Absent: the head only.
   */
  cutHeadShare?: number;
  /** Retries of one model call by the client (`agent.max_retries`; unset: its default in the config schema). */
  maxRetries?: number;
  /** `agent.min_context_window_tokens`: the floor of the refusal rule (unset: its default in the config schema). */
  minContextWindowTokens?: number;
  /** `agent.breaker_failure_threshold` and `agent.breaker_cooldown_seconds`; without it, no breaker. */
  circuitBreaker?: { failureThreshold: number; cooldownSeconds: number };
  /**
   * Where learned windows and breakers are kept: the fleet's store in Redis (a worker's), else this
   * runner's own memory.
   */
  modelState?: ModelStateStore;
  /** Input plus output tokens one turn may spend; 0 = no limit (`agent.max_tokens_per_turn`; unset: no limit). */
  maxTokensPerTurn?: number;
  /**
   * Where model calls are counted (`hermes_model_calls_total`, `hermes_model_tokens_total`); a
   * function is asked at each count (a worker's metrics are made after its runners).
   */
  metrics?: HermesMetrics | (() => HermesMetrics | undefined);
}

/** Model rounds allowed after the tool-call limit was reached before the turn fails. */
export const EXTRA_ROUNDS_AFTER_LIMIT = 2;

/** Longest `arguments` text of a call shown in events (the model sees it whole). */
export const EVENT_ARGUMENTS_MAX_CHARS = 200;

/** Share of a model's window a request may take when it is sent (the rest is room for the answer and estimate error). */
export const CALL_FIT_SHARE = 0.85;

/** System prompt of every agent turn. */
export const SYSTEM_PROMPT =
  'You are Hermes, an agent that runs unattended tasks for its user. Be concise and factual; say what you checked.';

/** The system prompt of a turn: `SYSTEM_PROMPT`, then a paragraph of each tool offered to it that has one. */
export function systemPromptWith(notes: readonly string[]): string {
  return [SYSTEM_PROMPT, ...notes].join('\n\n');
}

/** System prompt of a compaction summary. */
export const SUMMARY_PROMPT = [
  'You summarise part of a conversation between a user and Hermes, an agent that runs unattended tasks, so the conversation can go on without it.',
  'Write a short factual summary: what was asked, what was found, what was decided, and what is still open.',
  'Reduce tool outputs to their findings. Keep names, numbers, paths, identifiers and dates exact. No preamble, no advice.',
].join(' ');

/** What `complete()` returns. */
export interface Completion {
  content: string;
  /** Why the model stopped its last answer (`stop`, `length`, `content_filter`, …), as the endpoint said. */
  finishReason?: FinishReason;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  /** Tool-calling steps before the answer (empty without tools). */
  steps: ChatMessage[];
  /** What its model calls cost. */
  spend: ModelSpend;
  /** The answer's call passed `agent.max_tokens_per_turn`: the answer is kept, nothing more may be spent. */
  overBudget?: TurnBudgetOverrun;
}

/** Options of `complete()`. */
export interface CompleteOptions {
  /** System prompt; `null` sends none (the messages carry their own). Default `SYSTEM_PROMPT`. */
  system?: string | null;
  jsonObject?: boolean;
  /** Offer the operator's tools allowed from this surface (each of these surfaces); without it the call has no tools. */
  surface?: TurnSurfaces;
  onEvent?: TurnRequest['onEvent'];
  onDelta?: TurnRequest['onDelta'];
  /** A declared model name (`agent.models`); default the primary model. */
  model?: string;
  /** Why the calls are made (`model.called` events). @defaultValue 'turn' */
  purpose?: ModelCallPurpose;
  /** The turn's kind, for metrics labels. @defaultValue 'message' */
  kind?: string;
  /** What the turn already spent (a summary, the turn before its judge): counted against `agent.max_tokens_per_turn`. */
  spentBefore?: ModelSpend;
  /**
   * Sampling and output parameters sent with every model call of this `complete()` (a `/v1`
   * caller's `temperature`, `max_tokens`, …); unset = the endpoint's defaults. `jsonObject` wins
   * over `params.response_format`.
   */
  params?: ModelParams;
  /**
   * The turn the calls belong to (`run()` sets it): tools that act for a turn see it, and are
   * offered only with it. A judge or a summary is no turn.
   */
  turn?: ToolTurn;
  /** The occurrence's journal (`run()` passes the request's): see `TurnRequest.journal`. */
  journal?: TurnJournal;
}

/** Options of `summarise()`. */
export interface SummariseOptions {
  /** The turn's model (a declared name); used when `agent.compaction.model` is unset. */
  model?: string;
  sessionId?: string;
  kind?: string;
  onEvent?: TurnRequest['onEvent'];
}

/** What `contextOf()` returns. */
export interface ModelContext {
  /** The model id. */
  model: string;
  windowTokens: number;
  /** `agent.compaction.threshold` of the window. */
  thresholdTokens: number;
  /** `agent.compaction.target` of the window. */
  targetTokens: number;
  /** `agent.compaction.keep_recent_messages`. */
  keepRecent: number;
  /** How a message cut to fit is split between its head and its tail (`AgentRunnerOptions.cutHeadShare`). */
  cutHeadShare?: number;
}

/** Counts the tokens of a request's messages (with its system prompt and tool definitions). */
export type RequestEstimator = (messages: readonly EstimableMessage[]) => number;

/** A model calls can go to. */
interface ModelTarget {
  /** Declared name; undefined for the primary model (and a raw id of the primary endpoint). */
  name: string | undefined;
  /** Model id sent to the endpoint. */
  id: string;
  /** Undefined when no endpoint is configured. */
  client: OpenAI | undefined;
  /** The endpoint and model its learned window and breaker are stored by. */
  ref: ModelRef;
  /** Its window as configured (the declared model's, else `agent.context_window_tokens`). */
  configuredTokens: number | undefined;
}

/** The model calls of one `complete()` or `summarise()`: where they go and what they cost so far. */
interface CallScope {
  sessionId: string | undefined;
  kind: string;
  purpose: ModelCallPurpose;
  /** The caller's signal (drain, interrupt, stop). */
  callerSignal: AbortSignal;
  /** The caller's signal and the deadline together. */
  signal: AbortSignal;
  deadlineAt: number;
  onEvent: TurnRequest['onEvent'];
  /** The models tried in order: the requested one, then the fallbacks. */
  chain: ModelTarget[];
  /** Index in `chain` of the model calls go to now (a fallback that answered keeps the turn). */
  active: number;
  spend: ModelSpend;
}

/** One model request of a scope. */
interface ModelRequest {
  system: string | null;
  /** The conversation after the system prompt. */
  messages: ChatMessage[];
  tools: ChatCompletionTool[];
  /** Messages at the end the model has not seen yet (kept verbatim by the elision step). */
  keepRecent: number;
  toolChoiceNone?: boolean;
  jsonObject?: boolean;
  params?: ModelParams;
  onDelta?: (text: string) => void;
}

/** A request that was answered: the messages as sent (compacted when they did not fit) and what they were counted at. */
interface Sent {
  completion: ChatCompletion;
  messages: ChatMessage[];
  counter: TokenCounter;
  /** The request's tokens by `counter`, uncalibrated. */
  counted: number;
  /** The tokens the request was taken to have before it was sent (`counted`, calibrated for an estimate). */
  estimatedTokens: number;
}

/** Runs agent turns; `complete()` is also used by the judges (with tools, so they judge what a tool saw). */
export class AgentRunner implements TurnRunner {
  readonly kind = 'agent' as const;
  private readonly maxToolCalls: number;
  private readonly maxRetries: number;
  private readonly primary: ModelTarget;
  private readonly declared = new Map<string, ModelTarget>();
  private readonly fallbacks: ModelTarget[];
  private readonly perModel: Readonly<Record<string, number>>;
  private readonly health: ModelHealth;
  private readonly minWindowTokens: number;
  private readonly calibration = new TokenCalibration();
  private readonly threshold: number;
  private readonly target: number;
  private readonly keepRecent: number;

  /** @param toolbox - the operator's tools; without it turns have none */
  constructor(
    private readonly options: AgentRunnerOptions,
    private readonly toolbox?: Toolbox,
  ) {
    const defaults = configDefaults().agent;
    this.maxToolCalls = options.maxToolCalls ?? defaults.max_tool_calls;
    this.maxRetries = options.maxRetries ?? defaults.max_retries;
    this.threshold = options.compaction?.threshold ?? defaults.compaction.threshold;
    this.target = options.compaction?.target ?? defaults.compaction.target;
    this.keepRecent = options.compaction?.keepRecentMessages ?? defaults.compaction.keep_recent_messages;
    const clientFor = (baseUrl: string | undefined, apiKey: string | undefined) =>
      baseUrl || apiKey
        ? new OpenAI({
            baseURL: baseUrl,
            apiKey: apiKey ?? 'not-set',
            timeout: options.timeoutSeconds * 1000,
            maxRetries: this.maxRetries,
            fetch: retryingFetch(modelFetch),
          })
        : undefined;
    const perModel: Record<string, number> = {};
    for (const m of Object.values(options.models ?? {})) if (m.contextWindowTokens !== undefined) perModel[m.model] = m.contextWindowTokens;
    this.perModel = perModel;
    const targetAt = (name: string | undefined, id: string, baseUrl: string | undefined, apiKey: string | undefined) =>
      this.modelTarget(name, id, clientFor(baseUrl, apiKey), endpointOf(baseUrl, apiKey));
    this.primary = targetAt(undefined, options.model, options.baseUrl, options.apiKey);
    for (const [name, m] of Object.entries(options.models ?? {})) {
      this.declared.set(name, targetAt(name, m.model, m.baseUrl ?? options.baseUrl, m.apiKey ?? options.apiKey));
    }
    this.fallbacks = (options.fallbackModels ?? []).map((name) => this.resolve(name));
    this.minWindowTokens = options.minContextWindowTokens ?? defaults.min_context_window_tokens;
    const breaker = options.circuitBreaker;
    this.health = new ModelHealth(options.modelState ?? new MemoryModelState(), {
      failureThreshold: breaker?.failureThreshold ?? 0,
      cooldownMs: (breaker?.cooldownSeconds ?? 0) * 1000,
      probeLeaseMs: options.timeoutSeconds * 1000,
    });
  }

  /** A model target: `id` at `endpoint` (`endpointOf`) through `client`, with its configured window. */
  private modelTarget(name: string | undefined, id: string, client: OpenAI | undefined, endpoint: string | undefined): ModelTarget {
    return {
      name,
      id,
      client,
      ref: { endpoint: endpoint ?? '', model: id },
      configuredTokens: ownValue(this.perModel, id) ?? this.options.contextWindowTokens,
    };
  }

  /** The window of `target`, from what the fleet learned (`learned`, when already read) or the store. */
  private async windowOf(target: ModelTarget, learned?: LearnedWindow | null): Promise<ResolvedWindow> {
    const l = learned === undefined ? (await this.health.read(target.ref)).window : (learned ?? undefined);
    return resolveWindow({ model: target.id, learned: l, configuredTokens: target.configuredTokens });
  }

  /** One agent turn, tools included. */
  async run(request: TurnRequest): Promise<TurnOutput> {
    const turn: ToolTurn = {
      kind: request.kind ?? 'message',
      ...(request.origin ? { origin: request.origin } : {}),
      ...(request.selfPaced ? { selfPaced: true } : {}),
      ...(request.toolOutput === true || request.messages.some(isToolOutput) ? { toolOutput: true } : {}),
    };
    const res = await this.complete(request.messages, request.signal, request.sessionId, {
      surface: request.surface ?? 'cli',
      onEvent: request.onEvent,
      onDelta: request.onDelta,
      model: request.model,
      kind: request.kind,
      purpose: 'turn',
      turn,
      ...(request.journal ? { journal: request.journal } : {}),
    });
    return {
      reply: res.content,
      steps: res.steps,
      usage: res.usage,
      spend: res.spend,
      ...(res.overBudget ? { overBudget: res.overBudget } : {}),
      ...(turn.nextTickSeconds !== undefined ? { nextTickSeconds: turn.nextTickSeconds } : {}),
    };
  }

  /**
   * The window, compaction threshold and target of a model (its window as the fleet knows it now).
   * @param modelName - a declared name; undefined = the primary model
   * @throws TurnError `config` for an unknown name
   */
  async contextOf(modelName?: string): Promise<ModelContext> {
    const target = this.resolve(modelName);
    const windowTokens = (await this.windowOf(target)).tokens;
    return {
      model: target.id,
      windowTokens,
      thresholdTokens: Math.floor(this.threshold * windowTokens),
      targetTokens: Math.floor(this.target * windowTokens),
      keepRecent: this.keepRecent,
      cutHeadShare: this.options.cutHeadShare,
    };
  }

  /**
   * How a turn's request is counted, before it is sent: the system prompt, the messages given to the
   * returned function, and the definitions of the tools offered to `surface` (and to `turn`, when
   * given) — with the model's tokenizer when known, else estimated and calibrated
   * (`context/token-count.ts`). `counter` counts one text the same way, uncalibrated.
   * @throws TurnError `config` for an unknown model name
   */
  async estimator(
    modelName: string | undefined,
    surface?: TurnSurfaces,
    turn?: ToolTurn,
  ): Promise<{ estimate: RequestEstimator; counter: TokenCounter }> {
    const target = this.resolve(modelName);
    const tools = this.toolsFor(surface, turn);
    const system = this.systemFor(surface, turn, tools);
    const counter = await tokenCounterFor(target.id);
    return { estimate: (messages) => this.requestTokens(target, counter, system, messages, tools), counter };
  }

  /** Tokens one request takes by `estimator` (the same count, once). @throws TurnError `config` for an unknown model name */
  async estimateTokens(
    modelName: string | undefined,
    messages: readonly EstimableMessage[],
    surface?: TurnSurfaces,
    turn?: ToolTurn,
  ): Promise<number> {
    return (await this.estimator(modelName, surface, turn)).estimate(messages);
  }

  /**
   * One auxiliary call that summarises `messages` (for compaction): on `agent.compaction.model`
   * when set, else `options.model`. Its input is cut to fit that model's window.
   * @throws TurnError (with `spend`) when the call failed or the summary is empty
   */
  async summarise(
    messages: readonly CompactableMessage[],
    signal: AbortSignal,
    options: SummariseOptions = {},
  ): Promise<{ text: string; spend: ModelSpend }> {
    const compactionModel = this.options.compaction?.model;
    const target =
      compactionModel !== undefined && !this.declared.has(compactionModel)
        ? this.modelTarget(undefined, compactionModel, this.primary.client, this.primary.ref.endpoint) // a model id of the primary endpoint
        : this.resolve(compactionModel ?? options.model, options.sessionId);
    return await this.inScope(
      signal,
      { sessionId: options.sessionId, kind: options.kind, purpose: 'summary', onEvent: options.onEvent, target },
      async (scope) => {
        const counter = await tokenCounterFor(target.id);
        const estimate = (ms: readonly CompactableMessage[]) =>
          this.requestTokens(target, counter, SUMMARY_PROMPT, [{ role: 'user', content: summaryInput(ms) }], []);
        const fitted = await compactMessages(messages, {
          budgetTokens: Math.floor(CALL_FIT_SHARE * (await this.windowOf(target)).tokens),
          keepRecent: messages.length, // no stubs: the summary is to say what the tools found
          estimate,
          counter,
          make: (fields) => fields,
          cutHeadShare: this.options.cutHeadShare,
        });
        const { completion } = await this.call(scope, {
          system: SUMMARY_PROMPT,
          messages: [{ role: 'user', content: summaryInput(fitted.messages) }],
          tools: [],
          keepRecent: 1,
        });
        const text = (completion.choices[0]?.message.content ?? '').trim();
        if (!text) throw new TurnError('The model wrote an empty summary.', { kind: 'model', sessionId: options.sessionId });
        return { text, spend: scope.spend };
      },
    );
  }

  /**
   * Chat Completions with the system prompt prepended, as a tool-calling loop
   * when `options.surface` is set and tools are declared.
   * @returns reply text, token usage when reported, the tool steps, and the spend
   * @throws TurnError (with the `spend` of the calls made) `config` when no endpoint is configured
   *   or the model name is unknown, `network`, `timeout`, `aborted`, `model`, `budget`
   */
  async complete(messages: ChatMessage[], signal: AbortSignal, sessionId?: string, options: CompleteOptions = {}): Promise<Completion> {
    const target = this.resolve(options.model, sessionId);
    const surface = options.surface;
    const tools = this.toolsFor(surface, options.turn);
    // A tool offered to the turn may add a paragraph (the `schedules` tool: that the agent can schedule, and how the user undoes it).
    const system = options.system !== undefined ? options.system : this.systemFor(surface, options.turn, tools);
    const scopeInput = { sessionId, kind: options.kind, purpose: options.purpose ?? 'turn', onEvent: options.onEvent, target };
    return await this.inScope(signal, scopeInput, async (scope) => {
      const turnSignal = scope.signal;
      let convo: ChatMessage[] = [...messages];
      let unseen = Math.min(1, convo.length); // the new input
      const steps: ChatMessage[] = [];
      const usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
      let sawUsage = false;
      let calls = 0;
      let roundsAfterLimit = 0;
      const journal = options.journal;
      for (let round = 0; ; round++) {
        const limitReached = calls >= this.maxToolCalls;
        // A model answer an earlier run of this turn recorded is used as it is: the model is not asked again.
        let answer = journal?.replay.answers.get(round);
        if (answer) {
          scope.spend = sumSpend(scope.spend, answer.spend);
          if (!answer.spend.estimated && answer.spend.calls > 0) {
            sawUsage = true;
            usage.prompt_tokens += answer.spend.inputTokens;
            usage.completion_tokens += answer.spend.outputTokens;
            usage.total_tokens += answer.spend.inputTokens + answer.spend.outputTokens;
          }
        } else {
          const spentBefore = scope.spend;
          const sent = await this.call(scope, {
            system,
            messages: convo,
            tools,
            keepRecent: unseen,
            toolChoiceNone: limitReached,
            jsonObject: options.jsonObject,
            params: options.params,
            onDelta: options.onDelta,
          });
          convo = sent.messages;
          const res = sent.completion;
          if (res.usage) {
            sawUsage = true;
            usage.prompt_tokens += res.usage.prompt_tokens;
            usage.completion_tokens += res.usage.completion_tokens;
            usage.total_tokens += res.usage.total_tokens;
          }
          const choice = res.choices[0];
          const message = choice?.message;
          answer = {
            type: 'answer',
            round,
            content: message?.content ?? '',
            ...(message?.refusal ? { refusal: message.refusal } : {}),
            toolCalls: (message?.tool_calls ?? []).flatMap((c) =>
              c.type === 'function' ? [{ id: c.id, name: c.function.name, arguments: c.function.arguments }] : [],
            ),
            ...(choice?.finish_reason ? { finishReason: choice.finish_reason } : {}),
            spend: spendSince(spentBefore, scope.spend),
          };
          // Recorded before anything it asked for runs (docs/RELIABILITY.md, "A turn resumes from its journal").
          if (journal) await journal.append(answer);
        }
        const overBudget = this.overBudget(scope, options.spentBefore);
        const toolCalls: ToolCallRecord[] = answer.toolCalls;
        if (toolCalls.length === 0 || tools.length === 0) {
          // A refusal (`message.refusal`) is the answer when there is no content.
          const content = answer.content || answer.refusal || '';
          const finishReason = answer.finishReason;
          return {
            content,
            steps,
            ...(sawUsage ? { usage } : {}),
            spend: scope.spend,
            ...(finishReason ? { finishReason } : {}),
            ...(overBudget ? { overBudget } : {}),
          };
        }
        // Past the budget with tools still to run: the turn stops here, with no answer to keep.
        if (overBudget) throw new TurnError(turnOverrunText(overBudget), { kind: 'budget', sessionId, overrun: overBudget });
        if (limitReached && ++roundsAfterLimit > EXTRA_ROUNDS_AFTER_LIMIT) {
          throw new TurnError(`The model kept calling tools after the limit of ${this.maxToolCalls} calls per turn.`, {
            kind: 'model',
            sessionId,
          });
        }
        const assistant: ChatMessage = { role: 'assistant', content: answer.content, tool_calls: toolCalls };
        steps.push(assistant);
        convo.push(assistant);
        const results = await Promise.all(
          toolCalls.map((call) => {
            calls += 1;
            return this.journaledCall(
              call,
              calls,
              { sessionId: sessionId ?? '', surface: surface!, signal: turnSignal, turn: options.turn },
              options.onEvent,
              journal,
            );
          }),
        );
        if (turnSignal.aborted) throw turnSignal.reason;
        for (const r of results) {
          steps.push(r);
          convo.push(r);
        }
        if (options.turn && results.some(isToolOutput)) options.turn.toolOutput = true;
        unseen = 1 + results.length;
      }
    });
  }

  /** The model a declared name stands for (undefined = primary). @throws TurnError `config` for an unknown name */
  private resolve(name: string | undefined, sessionId?: string): ModelTarget {
    if (name === undefined) return this.primary;
    const target = this.declared.get(name);
    if (target) return target;
    const known = [...this.declared.keys()];
    throw new TurnError(
      `Unknown model "${name}": ${known.length > 0 ? `the declared models are ${known.map((k) => `"${k}"`).join(', ')}` : 'no models are declared'} (agent.models).`,
      { kind: 'config', sessionId, spend: NO_SPEND },
    );
  }

  /** The system prompt of a turn offered `tools`: `SYSTEM_PROMPT` and the paragraphs of those tools that have one. */
  private systemFor(surface: TurnSurfaces | undefined, turn: ToolTurn | undefined, tools: readonly ChatCompletionTool[]): string {
    return tools.length > 0 && surface && this.toolbox ? systemPromptWith(this.toolbox.promptNotes(surface, turn)) : SYSTEM_PROMPT;
  }

  /** Tool definitions offered to `surface` (none without a surface, a toolbox, or a call budget). */
  private toolsFor(surface: TurnSurfaces | undefined, turn?: ToolTurn): ChatCompletionTool[] {
    return surface && this.toolbox && this.maxToolCalls > 0 ? this.toolbox.definitions(surface, turn) : [];
  }

  /**
   * Run `fn` with a new scope of calls on `target` (then the fallbacks), bounded by
   * `agent.timeout_seconds` and `signal`; every error leaves as a TurnError carrying the scope's spend.
   */
  private async inScope<T>(
    signal: AbortSignal,
    input: {
      sessionId: string | undefined;
      kind: string | undefined;
      purpose: ModelCallPurpose;
      onEvent: TurnRequest['onEvent'];
      target: ModelTarget;
    },
    fn: (scope: CallScope) => Promise<T>,
  ): Promise<T> {
    const { sessionId, target } = input;
    if (!target.client) {
      throw new TurnError('No model is configured: set OPENAI_BASE_URL (and OPENAI_API_KEY) or agent.base_url.', {
        kind: 'config',
        sessionId,
        spend: NO_SPEND,
      });
    }
    const timeoutMs = this.options.timeoutSeconds * 1000;
    const deadline = AbortSignal.timeout(timeoutMs);
    const turnSignal = AbortSignal.any([signal, deadline]);
    const chain = [target, ...this.fallbacks.filter((f) => f.name !== target.name)];
    // Listeners it gathers, none a leak (they go with the scope): each tool call's, and each model call attempt's,
    // which the client never removes (`transport`): a turn makes at most a call more than its tool calls (and
    // compaction's), each tried on every model of the chain with its retries.
    setMaxListeners((this.maxToolCalls + 2) * (this.maxRetries + 1) * chain.length + 50, turnSignal);
    const scope: CallScope = {
      sessionId,
      kind: input.kind ?? 'message',
      purpose: input.purpose,
      callerSignal: signal,
      signal: turnSignal,
      deadlineAt: Date.now() + timeoutMs,
      onEvent: input.onEvent,
      chain,
      active: 0,
      spend: NO_SPEND,
    };
    try {
      return await fn(scope);
    } catch (err) {
      const turnError =
        err instanceof TurnError
          ? err
          : signal.aborted
            ? new TurnError('The turn was aborted.', { kind: 'aborted', sessionId, cause: err })
            : deadline.aborted
              ? new TurnError(`The turn did not finish within ${this.options.timeoutSeconds}s.`, { kind: 'timeout', sessionId, cause: err })
              : toTurnError(err, sessionId);
      turnError.spend ??= scope.spend;
      throw turnError;
    }
  }

  /** What the turn used and its limit once its calls (and what it spent before) reach `agent.max_tokens_per_turn`; else `undefined`. */
  private overBudget(scope: CallScope, spentBefore: ModelSpend | undefined): TurnBudgetOverrun | undefined {
    const limit = this.options.maxTokensPerTurn ?? 0;
    if (limit <= 0) return undefined;
    const used = totalTokens(sumSpend(spentBefore ?? NO_SPEND, scope.spend));
    return used < limit ? undefined : { usedTokens: used, limitTokens: limit };
  }

  /**
   * One model call of a scope: on the active model, then each fallback while the error is
   * transient or the model's circuit breaker is open. Emits `model.called` and counts it.
   * @returns the completion and the messages as sent (compacted when they did not fit)
   * @throws TurnError `model` when the breaker of the last model to try is open
   */
  private async call(scope: CallScope, req: ModelRequest): Promise<Sent> {
    let index = scope.active;
    for (;;) {
      const target = scope.chain[index]!;
      const next = scope.chain.findIndex((t, i) => i > index && t.client !== undefined);
      const { admission, state } = await this.health.admit(target.ref, Date.now());
      if (admission.kind === 'skip') {
        this.metrics()?.modelCallSkipped(scope.kind);
        emit(scope.onEvent, {
          type: 'model.skipped',
          data: { model: target.id, endpoint: target.ref.endpoint, probeAt: admission.probeAt, failures: admission.failures },
        });
        if (next > 0) {
          index = next;
          continue;
        }
        throw new TurnError(breakerOpenMessage(target, admission, scope.chain.length === 1), { kind: 'model', sessionId: scope.sessionId });
      }
      const started = Date.now();
      try {
        const sent = await tracing().span(
          SPAN.modelCall,
          { [ATTR.model]: target.id, 'hermes.model.purpose': scope.purpose },
          async (span) => {
            const answered = await this.send(scope, target, req, state.window ?? null);
            await this.noteOutcome(scope, target, state, { ok: true });
            const ms = Date.now() - started;
            const tokens = this.record(scope, target, answered, ms);
            span.set({
              [ATTR.inputTokens]: tokens.inputTokens,
              [ATTR.outputTokens]: tokens.outputTokens,
              'hermes.tokens.estimated': tokens.estimated,
              [ATTR.durationMs]: ms,
            });
            return answered;
          },
        );
        scope.active = index;
        return sent;
      } catch (err) {
        const transient = !scope.signal.aborted && isTransient(err) && !(err instanceof TurnError);
        // Only a failure of the model itself counts toward its breaker (not an abort, a refusal or a bad request).
        if (transient) await this.noteOutcome(scope, target, state, { ok: false, error: toTurnError(err, scope.sessionId).message });
        if (transient && next > 0) {
          index = next;
          continue;
        }
        this.recordFailure(scope, target, err, Date.now() - started);
        throw err;
      }
    }
  }

  /** Record a call's outcome on its model's breaker; an opening or closing is told and counted. */
  private async noteOutcome(
    scope: CallScope,
    target: ModelTarget,
    state: { breaker?: BreakerRecord },
    outcome: { ok: true } | { ok: false; error: string },
  ): Promise<void> {
    const r = await this.health.afterCall(target.ref, state.breaker, outcome, Date.now());
    if (r.opened) this.metrics()?.breakerOpened(target.id);
    if (r.opened || r.closed) {
      emit(scope.onEvent, {
        type: 'model.breaker',
        data: {
          model: target.id,
          endpoint: target.ref.endpoint,
          state: r.opened ? 'open' : 'closed',
          ...(r.opened && r.record ? { failures: r.record.failures, probeAt: r.record.openUntil! } : {}),
        },
      });
    }
  }

  /**
   * Send `req` to `target`, fitted to its window. A refusal for length teaches the window by the
   * refusal rule (`afterRefusal`), stored for the fleet; the request is compacted to the rule's
   * budget and sent again, until the provider takes it or the rule gives up.
   * @param learned - the window the fleet learned, as read when the call was admitted (null: none)
   * @throws TurnError `model` when the rule gives up, or the request cannot be compacted under the window
   */
  private async send(scope: CallScope, target: ModelTarget, req: ModelRequest, learned: LearnedWindow | null): Promise<Sent> {
    const counter = await tokenCounterFor(target.id);
    let windowTokens = (await this.windowOf(target, learned)).tokens;
    let messages = await this.fit(scope, target, req, counter, req.messages, Math.floor(CALL_FIT_SHARE * windowTokens), windowTokens);
    for (;;) {
      const counted = countRequestTokens(counter, req.system, messages, req.tools);
      try {
        const completion = await this.transport(scope, target, req, messages);
        return { completion, messages, counter, counted, estimatedTokens: this.calibrated(target, counter, counted) };
      } catch (err) {
        if (!(err instanceof ContextRefusal) || scope.signal.aborted) throw err;
        const { reading } = err;
        // The provider's own count of what it refused corrects an estimate for this model.
        if (reading.promptTokens !== undefined && !counter.encoding) this.calibration.observe(target.id, counted, reading.promptTokens);
        const sentTokens = reading.promptTokens ?? this.calibrated(target, counter, counted);
        const lesson = afterRefusal({
          windowTokens,
          sentTokens,
          statedWindowTokens: reading.windowTokens,
          floorTokens: this.minWindowTokens,
          fitShare: CALL_FIT_SHARE,
        });
        this.metrics()?.contextRefused(scope.kind, lesson?.how ?? 'failed');
        if (!lesson) {
          const n = (x: number) => x.toLocaleString('en-US');
          throw new TurnError(
            `${target.id} refused the request for length at about ${n(sentTokens)} tokens, no more than the smallest window to believe (${n(Math.min(this.minWindowTokens, reading.windowTokens ?? this.minWindowTokens))} tokens; agent.min_context_window_tokens): ${err.message}`,
            { kind: 'model', sessionId: scope.sessionId, cause: err },
          );
        }
        const stored = await this.health.learn(target.ref, {
          tokens: lesson.windowTokens,
          how: lesson.how,
          provider: reading.provider,
          at: Date.now(),
          said: err.said,
        });
        windowTokens = stored.tokens;
        emit(scope.onEvent, {
          type: 'model.refused',
          data: {
            model: target.id,
            endpoint: target.ref.endpoint,
            provider: reading.provider,
            status: err.status,
            sentTokens,
            windowTokens,
            how: lesson.how,
            said: err.said,
          },
        });
        const budget = Math.min(lesson.budgetTokens, Math.floor(CALL_FIT_SHARE * windowTokens));
        messages = await this.fit(scope, target, req, counter, messages, budget, windowTokens);
        // Sent again only when compaction made it smaller: the same request would be refused again.
        if (countRequestTokens(counter, req.system, messages, req.tools) >= counted) {
          throw new TurnError(
            `The request to ${target.id} did not fit its context window even after compaction (${windowTokens.toLocaleString('en-US')} tokens): ${err.message}`,
            { kind: 'model', sessionId: scope.sessionId, cause: err },
          );
        }
      }
    }
  }

  /**
   * `messages` compacted (without a model call) until the request fits `budgetTokens`, with a
   * `context.compacted` event; as they are when they fit already.
   * @param windowTokens - the model's window: a request still over it after compaction is not sent
   * @throws TurnError `model` when even compacted the request is over the model's window
   */
  private async fit(
    scope: CallScope,
    target: ModelTarget,
    req: ModelRequest,
    counter: TokenCounter,
    messages: ChatMessage[],
    budgetTokens: number,
    windowTokens: number,
  ): Promise<ChatMessage[]> {
    const estimate = (ms: readonly ChatMessage[]) => this.requestTokens(target, counter, req.system, ms, req.tools);
    if (estimate(messages) <= budgetTokens) return messages;
    const fitted = await compactMessages<ChatMessage>(messages, {
      budgetTokens,
      keepRecent: req.keepRecent,
      estimate,
      counter,
      make: (fields) => fields,
      cutHeadShare: this.options.cutHeadShare,
    });
    if (fitted.report)
      emit(scope.onEvent, { type: 'context.compacted', data: { ...fitted.report, scope: 'call', model: target.id, windowTokens } });
    const after = estimate(fitted.messages);
    if (after > windowTokens) {
      throw new TurnError(
        `The request to ${target.id} does not fit its context window (${windowTokens.toLocaleString('en-US')} tokens) even after compaction: about ${after.toLocaleString('en-US')} tokens.`,
        { kind: 'model', sessionId: scope.sessionId },
      );
    }
    return fitted.messages;
  }

  /**
   * The call itself, through a client whose `fetch` counts retries, makes their waits abortable and
   * reads refusals for length.
   * @throws ContextRefusal when the provider refused the request for length (in an error answer, or
   *   inside a 2xx answer that carries an error)
   */
  private async transport(scope: CallScope, target: ModelTarget, req: ModelRequest, messages: ChatMessage[]): Promise<ChatCompletion> {
    const body: ChatCompletionCreateParamsNonStreaming = {
      ...req.params,
      model: target.id,
      messages: [...(req.system ? [{ role: 'system' as const, content: req.system }] : []), ...messages.map(toParam)],
      ...(req.tools.length > 0 ? { tools: req.tools, ...(req.toolChoiceNone ? { tool_choice: 'none' as const } : {}) } : {}),
      ...(req.jsonObject ? { response_format: { type: 'json_object' as const } } : {}),
    };
    let refusal: ContextRefusal | undefined;
    const client = target.client!;
    const fetchOptions = callFetchOptions({
      maxRetries: this.maxRetries,
      deadlineAt: scope.deadlineAt,
      signal: scope.signal,
      onRetry: () => this.metrics()?.modelCallRetried(scope.kind),
      onRefusal: (r) => (refusal = r),
    });
    // The client adds a listener to the signal per attempt and never removes it: counted in `inScope`'s limit.
    const pending = req.onDelta
      ? streamed(client, body, req.onDelta, scope.signal, fetchOptions)
      : client.chat.completions.create(body, { signal: scope.signal, fetchOptions }).then(checkCompletion);
    try {
      return await untilAborted(pending, scope.signal);
    } catch (err) {
      if (refusal && err instanceof APIError) throw refusal;
      // Some servers answer a refusal with 200 and an error object (`checkCompletion` quotes it).
      const inAnswer = err instanceof MalformedAnswerError ? contextRefusalOf(200, err.message) : undefined;
      throw inAnswer ?? err;
    }
  }

  /**
   * Tokens of a request by `counter`: its tokenizer's count as it is, an estimate calibrated by
   * the model's reported counts.
   */
  private requestTokens(
    target: ModelTarget,
    counter: TokenCounter,
    system: string | null,
    messages: readonly EstimableMessage[],
    tools: readonly ChatCompletionTool[],
  ): number {
    return this.calibrated(target, counter, countRequestTokens(counter, system, messages, tools));
  }

  private calibrated(target: ModelTarget, counter: TokenCounter, counted: number): number {
    return counter.encoding ? counted : this.calibration.scale(target.id, counted);
  }

  /** Count a call that answered: its usage (or an estimate), event, metrics, spend. @returns its tokens */
  private record(
    scope: CallScope,
    target: ModelTarget,
    sent: Sent,
    ms: number,
  ): { inputTokens: number; outputTokens: number; estimated: boolean } {
    const { completion, counter } = sent;
    const usage = completion.usage;
    let tokens: { inputTokens: number; outputTokens: number; cachedTokens: number };
    if (usage) {
      if (!counter.encoding) this.calibration.observe(target.id, sent.counted, usage.prompt_tokens);
      tokens = {
        inputTokens: usage.prompt_tokens,
        outputTokens: usage.completion_tokens,
        cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
      };
    } else {
      const message = completion.choices[0]?.message;
      const out =
        (message?.content ?? '') +
        (message?.tool_calls ?? []).map((c) => (c.type === 'function' ? c.function.name + c.function.arguments : '')).join('');
      tokens = { inputTokens: sent.estimatedTokens, outputTokens: counter.text(out), cachedTokens: 0 };
    }
    const estimated = !usage;
    scope.spend = sumSpend(scope.spend, { calls: 1, ...tokens, lastInputTokens: tokens.inputTokens, estimated });
    const event: ModelCallEvent = {
      model: target.id,
      purpose: scope.purpose,
      ...tokens,
      estimated,
      estimatedInputTokens: sent.estimatedTokens,
      ms,
    };
    emit(scope.onEvent, { type: 'model.called', data: event });
    this.metrics()?.modelCallEnded(scope.kind, target === scope.chain[0] ? 'ok' : 'fallback', tokens);
    return { ...tokens, estimated };
  }

  /** Count a call that failed for good (an abort by the caller is only told, not counted as a failure). */
  private recordFailure(scope: CallScope, target: ModelTarget, err: unknown, ms: number): void {
    const aborted = scope.callerSignal.aborted;
    const error = aborted
      ? 'aborted'
      : scope.signal.aborted
        ? `the turn did not finish within ${this.options.timeoutSeconds}s`
        : toTurnError(err, scope.sessionId).message;
    const event: ModelCallEvent = {
      model: target.id,
      purpose: scope.purpose,
      inputTokens: 0,
      outputTokens: 0,
      cachedTokens: 0,
      estimated: false,
      ms,
      error,
    };
    emit(scope.onEvent, { type: 'model.called', data: event });
    if (!aborted) this.metrics()?.modelCallEnded(scope.kind, 'failed', event);
  }

  private metrics(): HermesMetrics | undefined {
    const m = this.options.metrics;
    return typeof m === 'function' ? m() : m;
  }

  /**
   * The `n`th call of the turn by its journal (docs/RELIABILITY.md, "A turn resumes from its journal"):
   * a call an earlier run finished gives its recorded result and does not run; a call in doubt (it
   * started, no result was recorded) runs again when its tool's policy says so (`Toolbox.onDoubt`),
   * else the model is told its outcome is unknown; any other call is recorded as started, runs with
   * its `HERMES_STEP_ID`, and its result is recorded — unless the turn was aborted meanwhile (the call
   * is then in doubt for the run that resumes the turn). Without a journal, the call just runs.
   */
  private async journaledCall(
    call: ToolCallRecord,
    n: number,
    ctx: ToolCallScope,
    onEvent: CompleteOptions['onEvent'],
    journal: TurnJournal | undefined,
  ): Promise<ChatMessage> {
    if (!journal) return (await this.runCall(call, n, ctx, onEvent)).message;
    const state = callState(journal.replay, n);
    if (state.state === 'done') return { role: 'tool', tool_call_id: call.id, name: call.name, content: state.result.content };
    const record = async (content: string, error: string | undefined) =>
      await journal.append({ type: 'result', call: n, id: call.id, name: call.name, content, ...(error ? { error } : {}), at: Date.now() });
    if (state.state === 'in-doubt' && this.toolbox!.onDoubt(call.name) === 'report') {
      const content = inDoubtText(call.name);
      const shownArgs = call.arguments.slice(0, EVENT_ARGUMENTS_MAX_CHARS);
      emit(onEvent, { type: 'tool.called', data: { callId: call.id, name: call.name, arguments: shownArgs } });
      emit(onEvent, {
        type: 'tool.result',
        data: { callId: call.id, name: call.name, arguments: shownArgs, ms: 0, bytes: 0, error: IN_DOUBT_ERROR },
      });
      await record(content, IN_DOUBT_ERROR);
      return { role: 'tool', tool_call_id: call.id, name: call.name, content };
    }
    await journal.append({ type: 'started', call: n, id: call.id, name: call.name, at: Date.now() });
    const ran = await this.runCall(call, n, { ...ctx, stepId: stepId(journal.occurrenceId, n) }, onEvent);
    if (!ctx.signal.aborted) await record(ran.message.content, ran.error);
    return ran.message;
  }

  /** Run the `n`th call of the turn (or refuse it past the limit), with its events; `error` says why it failed. */
  private async runCall(
    call: ToolCallRecord,
    n: number,
    ctx: ToolCallScope,
    onEvent: CompleteOptions['onEvent'],
  ): Promise<{ message: Extract<ChatMessage, { role: 'tool' }>; error?: string }> {
    const shownArgs = call.arguments.slice(0, EVENT_ARGUMENTS_MAX_CHARS);
    emit(onEvent, { type: 'tool.called', data: { callId: call.id, name: call.name, arguments: shownArgs } });
    if (n > this.maxToolCalls) {
      const content = `Error: refused — this turn has used its limit of ${this.maxToolCalls} tool calls. Answer now with what you have.`;
      const error = 'tool call limit reached';
      emit(onEvent, {
        type: 'tool.result',
        data: { callId: call.id, name: call.name, arguments: shownArgs, ms: 0, bytes: 0, error },
      });
      return { message: { role: 'tool', tool_call_id: call.id, name: call.name, content }, error };
    }
    const r = await tracing().span(SPAN.toolCall, { [ATTR.tool]: call.name, 'gen_ai.tool.call.id': call.id }, async (span) => {
      const done = await this.toolbox!.call(call.name, call.arguments, ctx);
      span.set({ [ATTR.durationMs]: done.ms, 'hermes.tool.bytes': done.bytes, 'error.type': done.error ? 'tool_error' : undefined });
      return done;
    });
    emit(onEvent, {
      type: 'tool.result',
      data: {
        callId: call.id,
        name: call.name,
        arguments: shownArgs,
        ms: r.ms,
        bytes: r.bytes,
        ...(r.error ? { error: r.error.message } : {}),
        ...(r.truncated ? { truncated: true } : {}),
      },
    });
    return {
      message: { role: 'tool', tool_call_id: call.id, name: call.name, content: r.content },
      ...(r.error ? { error: r.error.message } : {}),
    };
  }
}

/** The event stream's error of a call in doubt that was not run again. */
export const IN_DOUBT_ERROR = 'outcome unknown: the call was in doubt and was not run again';

/**
 * What the model is told of a call in doubt that is not run again (its tool is not idempotent and
 * no `tools.on_doubt` policy says `rerun`): the outcome is unknown, why, and what it can do.
 */
export function inDoubtText(tool: string): string {
  return (
    `Error: the outcome of this call is unknown. An earlier run of this turn started it, then ended before its result was recorded ` +
    `(its worker stopped or lost the job). It was not run again, because ${tool} is not declared idempotent (tools.on_doubt): ` +
    `it may or may not have taken effect. Check the current state with another tool before relying on it or calling it again.`
  );
}

/** The spend of the calls made between two readings of a scope's spend. */
function spendSince(before: ModelSpend, after: ModelSpend): ModelSpend {
  return {
    calls: after.calls - before.calls,
    inputTokens: after.inputTokens - before.inputTokens,
    outputTokens: after.outputTokens - before.outputTokens,
    cachedTokens: after.cachedTokens - before.cachedTokens,
    lastInputTokens: after.lastInputTokens,
    estimated: after.estimated, // sticky: a call estimated before this one marks it too
  };
}

/** The conversation a summary is written from, as one text. */
function summaryInput(messages: readonly CompactableMessage[]): string {
  const lines = messages.map((m) => {
    if (m.role === 'tool') return `Tool result${m.name ? ` (${m.name})` : ''}: ${m.content}`;
    const calls = (m.tool_calls ?? []).map((c) => `\n[called ${c.name}(${c.arguments})]`).join('');
    const who = m.role === 'user' ? 'User' : m.role === 'assistant' ? 'Assistant' : 'System';
    return `${who}: ${m.content}${calls}`;
  });
  return `Summarise this conversation:\n\n${lines.join('\n\n')}`;
}

/**
 * One model call with `stream: true`: content deltas go to `onDelta`; resolves with the completion
 * assembled from the chunks (`StreamAssembler`: tool calls also from upstreams that omit `index` or
 * repeat id and name). An endpoint that answers JSON instead of an event stream is read as a
 * non-streamed answer (`checkCompletion`: its own error message when it sent one).
 * @throws StreamAssemblyError when the chunks make no complete answer; MalformedAnswerError
 */
async function streamed(
  client: OpenAI,
  body: ChatCompletionCreateParamsNonStreaming,
  onDelta: (text: string) => void,
  signal: AbortSignal,
  fetchOptions: CallFetchOptions,
): Promise<ChatCompletion> {
  const response = await client.chat.completions
    .create({ ...body, stream: true, stream_options: { include_usage: true } }, { signal, fetchOptions })
    .asResponse();
  if (!(response.headers.get('content-type') ?? '').includes('text/event-stream')) {
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON: quoted as it is */
    }
    const completion = checkCompletion(parsed);
    const content = completion.choices[0]?.message.content;
    if (content) onDelta(content);
    return completion;
  }
  const controller = new AbortController();
  const onAbort = () => controller.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    const answer = new StreamAssembler(onDelta);
    for await (const chunk of Stream.fromSSEResponse<ChatCompletionChunk>(response, controller, client)) answer.add(chunk);
    if (signal.aborted) throw signal.reason;
    return answer.finish();
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

function emit(onEvent: CompleteOptions['onEvent'], event: TurnEvent): void {
  if (!onEvent) return;
  try {
    void Promise.resolve(onEvent(event)).catch(() => {});
  } catch {
    /* an event sink never fails a turn */
  }
}

/** A runner message as a Chat Completions message. */
function toParam(m: ChatMessage): ChatCompletionMessageParam {
  if (m.role === 'tool') return { role: 'tool', tool_call_id: m.tool_call_id, content: m.content };
  if (m.role === 'assistant' && m.tool_calls?.length) {
    return {
      role: 'assistant',
      content: m.content || null,
      tool_calls: m.tool_calls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } })),
    };
  }
  return { role: m.role, content: m.content };
}

/** Why a call to `target` is not made: its breaker is open, and when it probes. */
function breakerOpenMessage(target: ModelTarget, skip: Extract<Admission, { kind: 'skip' }>, alone: boolean): string {
  const inSeconds = Math.max(0, Math.ceil((skip.probeAt - Date.now()) / 1000));
  return (
    `Not calling ${target.id} at ${target.ref.endpoint}: its circuit breaker is open after ${skip.failures} failed calls in a row` +
    `${skip.lastError ? ` (last: ${skip.lastError})` : ''}; it is probed again at ${new Date(skip.probeAt).toISOString()} (in ${inSeconds} s), ` +
    (alone ? 'and no fallback model is configured (agent.fallback_models).' : 'and no other model is left to try.')
  );
}

function toTurnError(err: unknown, sessionId: string | undefined): TurnError {
  if (err instanceof TurnError) return err;
  if (err instanceof ContextRefusal) {
    return new TurnError(`The model endpoint refused the request for length: ${err.message}`, { kind: 'model', sessionId, cause: err });
  }
  if (err instanceof APIUserAbortError) return new TurnError('The turn was aborted.', { kind: 'aborted', sessionId, cause: err });
  if (err instanceof APIConnectionTimeoutError)
    return new TurnError('The model did not answer in time.', { kind: 'timeout', sessionId, cause: err });
  if (err instanceof APIConnectionError) {
    return new TurnError(`The model endpoint could not be reached: ${err.message}`, { kind: 'network', sessionId, cause: err });
  }
  if (err instanceof APIError) {
    // openai's message is `<status> <the body's message>`, or `<status> status code (no body)`: the status is said once.
    const status: unknown = err.status;
    const said = err.message === `${String(status)} status code (no body)` ? undefined : err.message;
    const text =
      typeof status === 'number'
        ? answeredText('The model endpoint', status, said)
        : `The model endpoint answered with an error: ${err.message}`;
    return new TurnError(text, {
      kind: 'model',
      sessionId,
      cause: err,
    });
  }
  if (err instanceof MalformedAnswerError) return new TurnError(err.message, { kind: 'model', sessionId, cause: err });
  if (err instanceof StreamAssemblyError) {
    return new TurnError(`The model's streamed answer could not be assembled: ${err.message}.`, { kind: 'model', sessionId, cause: err });
  }
  return new TurnError(`The model call failed: ${(err as Error).message}`, { kind: 'model', sessionId, cause: err });
}
