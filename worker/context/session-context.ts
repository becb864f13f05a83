/**
 * Before a session turn (user message, goal continuation, loop or heartbeat
 * tick): when the session's transcript plus the new input reach the turn
 * model's compaction threshold (`agent.compaction.threshold` of its window),
 * bring them down to its target (`agent.compaction.target`), with the policy
 * of `compaction.ts` — tool results before the recent tail stubbed first, then
 * one summary of the middle by an auxiliary call (earlier summaries kept and a
 * marker for the rest if that fails). The recent tail holds at most
 * `TAIL_SHARE_OF_TARGET` of the target.
 *
 * A transcript is also compacted (by a summary) when it holds so many messages
 * that the turn's own could pass `worker.transcript_max_messages`: the store
 * would otherwise drop its oldest ones at the commit, the head first, and
 * every later request would start differently (`messagesThreshold`).
 *
 * The room between target and threshold is what keeps requests cheap: until
 * the next compaction a turn sends the head, the summary and the messages
 * appended since, unchanged, so a provider's prompt cache serves that prefix.
 *
 * The compacted transcript is what the turn runs on, and the commit writes it
 * back in place of the stored one (`SessionStore.commitTurn`,
 * `replaceTranscript`: only if the stored one is still as read), so the next
 * turn starts from it. The session event stream keeps everything that was
 * said; a `context.compacted` event records the tokens before and after.
 */
import type { TranscriptMessage } from '../../scheduler/session/session-store.ts';
import { NO_SPEND, sumSpend, type ModelSpend } from '../../scheduler/model-spend.ts';
import type { ToolTurn, TurnSurfaces } from '../tools/tool.ts';
import { holdsToolOutput, turnMessages } from './transcript-messages.ts';
import { sessionEventSink } from '../turn-runners/turn-events.ts';
import type { WorkerDeps } from '../worker-deps.ts';
import { compactMessages, type CompactionReport } from './compaction.ts';
import { summaryDigest } from '../../scheduler/journal/turn-replay.ts';
import type { TurnJournal } from '../turn-runners/turn-runner.ts';

/** Share of the compaction target the recent tail may hold (the rest: the head, the summary, the new input). */
export const TAIL_SHARE_OF_TARGET = 0.5;

/**
 * Most messages a transcript may hold before a turn: `transcriptMax` less room for what the turn
 * appends (its input, a call and a result per tool call, its reply), at most half the cap. A turn
 * that appends more still has its oldest messages dropped by the store (the cap is the bound).
 */
export function messagesThreshold(transcriptMax: number, maxToolCalls: number): number {
  return transcriptMax - Math.min(2 + 2 * maxToolCalls, Math.floor(transcriptMax / 2));
}

/** A transcript ready for a turn. */
export interface FittedContext {
  transcript: TranscriptMessage[];
  /** Set when the transcript was compacted: what the commit writes back. */
  replace?: { messages: TranscriptMessage[]; readLength: number; readLast: TranscriptMessage | undefined };
  report?: CompactionReport;
  /** The summary call's spend (none when no summary was written). */
  spend: ModelSpend;
}

/**
 * Fit `transcript` + `input` to the compaction policy of `model` (a declared name; undefined = primary).
 * Never throws for a failed summary (a marker stands in); a turn is never failed by compaction.
 */
export async function fitSessionContext(
  deps: WorkerDeps,
  request: {
    sessionId: string;
    transcript: TranscriptMessage[];
    input: string;
    model?: string;
    surface: TurnSurfaces;
    signal: AbortSignal;
    kind: string;
    events?: Record<string, unknown>;
    /** The turn to come, so the estimate holds the tools (and system prompt) offered to it. */
    turn?: ToolTurn;
    /**
     * The occurrence's journal (a loop tick's): a summary written by an earlier run of the turn for the
     * same messages is used instead of a new call; a new one is recorded.
     */
    journal?: TurnJournal;
  },
): Promise<FittedContext> {
  const runner = deps.runners.agent;
  const { transcript, input, model, surface } = request;
  const ctx = await runner.contextOf(model);
  const counting = await runner.estimator(model, surface, request.turn);
  const estimate = (messages: readonly TranscriptMessage[]) => counting.estimate(turnMessages([...messages], input));
  let spend: ModelSpend = NO_SPEND;
  const fitted = await compactMessages<TranscriptMessage>(transcript, {
    // The input itself is part of the request: the transcript gets what is left of the threshold and the target.
    thresholdTokens: ctx.thresholdTokens,
    budgetTokens: ctx.targetTokens,
    keepRecent: ctx.keepRecent,
    tailTokens: Math.floor(TAIL_SHARE_OF_TARGET * ctx.targetTokens),
    maxMessages: messagesThreshold(deps.config.worker.transcript_max_messages, deps.config.agent.max_tool_calls),
    cutHeadShare: ctx.cutHeadShare,
    estimate,
    counter: counting.counter,
    summarise: async (middle) => {
      const journal = request.journal;
      const of = journal ? summaryDigest(middle) : '';
      const recorded = journal?.replay.summaries.get(of);
      if (recorded) {
        spend = sumSpend(spend, recorded.spend);
        return recorded.text;
      }
      try {
        const res = await runner.summarise(middle, request.signal, {
          model,
          sessionId: request.sessionId,
          kind: request.kind,
          onEvent: sessionEventSink(deps, request.sessionId, request.events ?? {}),
        });
        spend = sumSpend(spend, res.spend);
        // Recorded before the turn goes on (docs/RELIABILITY.md, "A turn resumes from its journal").
        if (journal) await journal.append({ type: 'summary', of, text: res.text, spend: res.spend });
        return res.text;
      } catch (err) {
        const failed = (err as { spend?: ModelSpend }).spend;
        if (failed) spend = sumSpend(spend, failed);
        throw err;
      }
    },
    // A summary carries the provenance of what it stands for (`contextSurfaces`), and whether that held a tool's output (`holdsToolOutput`).
    make: ({ content }, standsFor) => {
      const surfaces = [...new Set(standsFor.flatMap((m) => [...(m.surface ? [m.surface] : []), ...(m.surfaces ?? [])]))];
      return {
        role: 'user',
        content,
        at: Date.now(),
        source: 'summary',
        ...(surfaces.length ? { surfaces } : {}),
        ...(holdsToolOutput(standsFor) ? { tool_output: true as const } : {}),
      };
    },
  });
  if (!fitted.report) return { transcript, spend };
  await deps.sessions.appendEvent(request.sessionId, 'context.compacted', {
    scope: 'transcript',
    model: ctx.model,
    windowTokens: ctx.windowTokens,
    thresholdTokens: ctx.thresholdTokens,
    targetTokens: ctx.targetTokens,
    ...fitted.report,
    ...request.events,
  });
  deps.log.info({ sessionId: request.sessionId, ...fitted.report }, 'transcript compacted');
  return {
    transcript: fitted.messages,
    replace: { messages: fitted.messages, readLength: transcript.length, readLast: transcript[transcript.length - 1] },
    report: fitted.report,
    spend,
  };
}
