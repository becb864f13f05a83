/**
 * Human output of `hermes status`: each running gateway's platforms, the loops and
 * heartbeats of every session as aligned columns, then the goals (finished ones only
 * with `--all`; the cron jobs are `cron list`'s table, `commands/cron-format.ts`), then
 * the set-aside input, then the signed webhooks with their last deliveries.
 */
import { agentCreatorCell } from '../scheduler/session/origin.ts';
import { formatSeconds } from '../scheduler/interval.ts';
import type { GoalRecord } from '../scheduler/goal/goal-state.ts';
import type { LoopRecord } from '../scheduler/loop/loop-state.ts';
import type { SetAsideInput } from '../scheduler/session/set-aside.ts';
import { cadence } from '../scheduler/loop/loop-service.ts';
import { cachedNote } from '../scheduler/model-spend.ts';
import { table } from './commands/cron-format.ts';
import { clip } from '../scheduler/text/clip.ts';
import { describePlatformState, platformLabel, type GatewayPlatforms } from '../scheduler/delivery/platform-state.ts';
import type { HookStatusView } from '../scheduler/hooks/hook-status.ts';

/**
 * The schedule table of `hermes status`.
 * @param next - next due time (epoch ms) by `<session>:<kind>`, for active schedules
 * @param options.all - finished schedules were included (changes only the empty-table hint)
 */
export function formatSchedules(
  records: LoopRecord[],
  next: Map<string, number | undefined>,
  now: number,
  options: { all: boolean },
): string[] {
  if (records.length === 0) {
    return [options.all ? 'no loops or heartbeats' : 'no active or paused loops or heartbeats (--all shows finished ones)'];
  }
  const sorted = [...records].sort((a, b) => a.sessionId.localeCompare(b.sessionId) || a.kind.localeCompare(b.kind));
  // `BY`: `agent (telegram)` for what the agent made with its `schedules` tool (`agent (telegram, tool output)`
  // when made after reading a tool's output); shown when something listed was.
  const by = records.some((r) => r.createdBy);
  return table(
    ['SESSION', 'KIND', 'STATE', 'CADENCE', 'TICKS', 'NEXT', 'TOKENS', ...(by ? ['BY'] : []), 'PROMPT'],
    sorted.map((r) => {
      const due = next.get(`${r.sessionId}:${r.kind}`);
      const nextText =
        r.status !== 'active' ? '—' : due === undefined ? 'pending' : due <= now ? 'due now' : `in ${formatSeconds((due - now) / 1000)}`;
      const ticks = r.maxTicks > 0 ? `${r.ticksUsed}/${r.maxTicks}` : `${r.ticksUsed}`;
      const state = r.statusReason && r.status !== 'active' ? `${r.status} (${clip(r.statusReason, 30)})` : r.status;
      const quiet = [r.silentTicks ? `${r.silentTicks} silent` : '', r.unchangedTicks ? `${r.unchangedTicks} unchanged` : '']
        .filter(Boolean)
        .join(', ');
      const ticksText = `${r.times !== null ? `${ticks} (times ${r.times})` : ticks}${quiet ? ` (${quiet})` : ''}`;
      const byText = r.createdBy ? agentCreatorCell(r.createdBy) : '—';
      return [r.sessionId, r.kind, state, cadence(r), ticksText, nextText, tokensColumn(r), ...(by ? [byText] : []), clip(r.prompt, 50)];
    }),
  );
}

/** `34,512 in (30,720 cached) / 1,204 out · 12 calls` (`~` when estimated), `—` before the first model call. */
export function tokensColumn(r: Pick<LoopRecord, 'spend' | 'maxTokens' | 'budgetTokens'>): string {
  const t = r.spend;
  const limit = r.maxTokens ? ` · budget ${(r.budgetTokens ?? 0).toLocaleString('en-US')}/${r.maxTokens.toLocaleString('en-US')}` : '';
  if (!t || t.calls === 0) return `—${limit}`;
  const approx = t.estimated ? '~' : '';
  return `${approx}${t.inputTokens.toLocaleString('en-US')} in${cachedNote(t)} / ${approx}${t.outputTokens.toLocaleString('en-US')} out · ${t.calls} call${t.calls === 1 ? '' : 's'}${limit}`;
}

/**
 * The goal table of `hermes status`: each session's standing goal — active or paused (with why),
 * achieved and cleared ones only with `--all` — its turns used of its budget and its spend.
 */
export function formatGoals(goals: GoalRecord[], options: { all: boolean }): string[] {
  if (goals.length === 0) return [options.all ? 'goals: none' : 'goals: none active or paused'];
  const sorted = [...goals].sort((a, b) => a.sessionId.localeCompare(b.sessionId));
  return table(
    ['SESSION', 'GOAL', 'STATE', 'TURNS', 'TOKENS'],
    sorted.map((g) => {
      const state =
        g.status === 'active' && g.parked
          ? 'active (waiting)'
          : g.statusReason && g.status !== 'active'
            ? `${g.status} (${clip(g.statusReason, 40)})`
            : g.status;
      return [g.sessionId, clip(g.text, 40), state, `${g.turnsUsed}/${g.maxTurns}`, tokensColumn(g)];
    }),
  );
}

/**
 * The set-aside table of `hermes status`: each session's input that failed on every try and was set
 * aside so the session went on (docs/RELIABILITY.md, "Session input runs in order, and a bad input is
 * set aside"), newest first, with the last try's error; the whole input is at
 * `GET /api/sessions/<session>/set-aside`.
 */
export function formatSetAside(inputs: SetAsideInput[], now: number): string[] {
  return [
    `set-aside input: ${inputs.length} (GET /api/sessions/<session>/set-aside has each in full)`,
    ...table(
      ['SESSION', 'SET ASIDE', 'TRIES', 'ERROR', 'MESSAGE'],
      inputs.map((i) => [
        i.sessionId,
        `${formatSeconds(Math.max(0, now - i.setAsideAt) / 1000)} ago`,
        String(i.attempts),
        clip(i.error, 60),
        clip(i.text, 40),
      ]),
    ),
  ];
}

/**
 * The platforms of every running gateway, as each gateway published them
 * (`scheduler/delivery/platform-state.ts`): one line per platform, its state and, when failed, why.
 */
export function formatPlatforms(gateways: readonly GatewayPlatforms[], now: number): string[] {
  if (gateways.length === 0) return ['platforms: no gateway running (`hermes up` or `hermes gateway` relays Telegram, Slack and Discord)'];
  return gateways.flatMap((g) => [
    `platforms (gateway ${g.gateway})`,
    ...g.platforms.map((p) => `  ${platformLabel(p.platform).padEnd(9)} ${describePlatformState(p, now)}`),
  ]);
}

/**
 * The hook table of `hermes status`: each signed webhook the configuration declares (`hooks.<name>`),
 * what it acts on, and its last delivery — when, its event, and what it started (a turn with whether
 * its session answered yet, a cron run, a loop's tick).
 */
export function formatHooks(hooks: readonly HookStatusView[], now: number): string[] {
  const ago = (at: number) => `${formatSeconds(Math.max(0, now - at) / 1000)} ago`;
  return [
    'hooks',
    ...table(
      ['HOOK', 'ACTION', 'TARGET', 'LAST DELIVERY', 'EVENT', 'STARTED'],
      hooks.map((h) => {
        const d = h.last_delivery;
        if (!d) return [h.name, h.action, clip(h.target, 40), 'never', '—', '—'];
        const a = d.accepted;
        const started =
          a.action === 'turn'
            ? `turn ${d.turn?.state ?? 'waiting'}${d.turn?.answered_at !== undefined ? ` ${ago(d.turn.answered_at)}` : ''}`
            : a.action === 'run_job'
              ? `run ${a.run_id}`
              : `tick of ${a.schedule} ${a.loop_id}`;
        return [h.name, h.action, clip(h.target, 40), ago(d.at), d.event || '—', started];
      }),
    ),
  ];
}
