/**
 * `--watch`: the one operator-declared check a schedule runs before its turn
 * (docs/CONTEXT.md, "Watches"). Loops and heartbeats (`../loop/tick-processor.ts`) and
 * cron jobs (`../cron/cron-processor.ts`) take the same steps: `runWatch` before the
 * turn, `keepWatchBase` after a commit that kept the digest. The check is a
 * tool call through the toolbox (`Toolbox.watch`), with the schedule's surface
 * (`tools.allow_from` applies at every run, as when the schedule was set:
 * `scheduler/economy/economy-check.ts`).
 *
 * Policy:
 *   - The check sees the whole state, never the result cut for the model: a
 *     `read_file:` check digests the whole file, streamed (past
 *     `tools.watch_max_bytes`, its size, head and last `watch_max_bytes`);
 *     `http_get:` and command checks their whole output.
 *   - The digest (sha256) equal to the one kept from the last tick that ran the
 *     check → the tick is `unchanged`: no model call, nothing in the transcript.
 *   - Different, or the first tick → the turn runs and its input gets what
 *     changed, told against the output kept from that tick (the base,
 *     `Keys.scheduleWatchBase` / `Keys.cronWatchBase`): for an output that only
 *     grew, the appended part; else a unified diff (jsdiff) when both outputs
 *     are at most `tools.watch_diff_max_bytes` and the diff fits
 *     `tools.max_result_bytes`; else the output's head and tail. Every section
 *     is cut by the big-result rule (`../tools/tool-output.ts`).
 *   - A check that fails counts as changed: the agent sees the error, and no
 *     digest is kept (the next tick that works is changed too, told against the
 *     last output that worked).
 */
import { createTwoFilesPatch } from 'diff';
import { parseWatch } from '../../scheduler/economy/economy-check.ts';
import type { TurnSurfaces } from '../tools/tool.ts';
import type { ToolOutput } from '../tools/tool-output.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/** What a watch saw at a kept tick: what its next change is told against. */
export interface WatchBase {
  /** The schedule it belongs to (a loop's id, a cron job's id): another schedule's base is never used. */
  owner: string;
  spec: string;
  digest: string;
  /** Bytes of the output. */
  size: number;
  /** The output itself, while it is at most `tools.watch_diff_max_bytes`. */
  content?: string;
}

/** What a check gave. */
export interface WatchResult {
  /** sha256 (hex) of the whole output; `null` when the check failed (always changed, no digest kept). */
  digest: string | null;
  /** False: the digest is the one kept from the last tick (no turn runs). */
  changed: boolean;
  /** What the turn's input gets when changed: what the check saw, or what changed. */
  section: string;
  /**
   * What to keep (`keepWatchBase`) once a commit kept `digest`; absent when there is nothing new
   * to keep (unchanged, with a base kept already) or the check failed.
   */
  base?: WatchBase;
  error?: string;
}

/** The watch of one schedule. */
export interface WatchOf {
  spec: string;
  /** The schedule's id (`WatchBase.owner`). */
  owner: string;
  /** The digest kept from the last tick that ran the check; `null`/absent: none. */
  lastDigest: string | null | undefined;
  /** Where its base is kept (`Keys.scheduleWatchBase`, `Keys.cronWatchBase`). */
  baseKey: string;
}

/** Run the check of `watch` for a schedule of `ctx.sessionId` answering to `ctx.surface` (the rule above). Never throws. */
export async function runWatch(
  deps: Pick<WorkerDeps, 'tools' | 'redis' | 'config'>,
  watch: WatchOf,
  ctx: { sessionId: string; surface: TurnSurfaces; signal: AbortSignal },
): Promise<WatchResult> {
  const { spec } = watch;
  const failed = (message: string): WatchResult => ({
    digest: null,
    changed: true,
    section: `\n\n[Watch ${spec}: the check failed, which counts as a change. The error:]\nError: ${message}`,
    error: message,
  });
  let check: ReturnType<typeof parseWatch>;
  try {
    check = parseWatch(spec);
  } catch (err) {
    return failed((err as Error).message);
  }
  const base = await readWatchBase(deps, watch);
  const t = deps.config.tools;
  const ran = await deps.tools.watch(check.tool, check.args, ctx, {
    keepBytes: t.watch_diff_max_bytes,
    ...(base ? { since: base.size } : {}),
  });
  if (ran.error) return failed(ran.error.message);
  const out = ran.output;
  const digest = out.digest();
  const kept = out.kept();
  const next: WatchBase = { owner: watch.owner, spec, digest, size: out.bytes, ...(kept !== undefined ? { content: kept } : {}) };
  if (watch.lastDigest && digest === watch.lastDigest) return { digest, changed: false, section: '', ...(base ? {} : { base: next }) };
  return { digest, changed: true, section: changeSection(spec, out, base, t.max_result_bytes), base: next };
}

/** Keep `base` as what the schedule's next change is told against (after a commit that kept its digest). */
export async function keepWatchBase(deps: Pick<WorkerDeps, 'redis'>, key: string, base: WatchBase): Promise<void> {
  const fields: Record<string, string> = { owner: base.owner, spec: base.spec, digest: base.digest, size: String(base.size) };
  if (base.content !== undefined) fields.content = base.content;
  await deps.redis.multi().del(key).hset(key, fields).exec();
}

/** The schedule's base, when there is one of this schedule and this check (a base that cannot be read counts as none). */
async function readWatchBase(deps: Pick<WorkerDeps, 'redis'>, watch: WatchOf): Promise<WatchBase | undefined> {
  const none: Record<string, string> = {};
  const stored: Record<string, string | undefined> = await deps.redis.hgetall(watch.baseKey).catch(() => none);
  const { owner, spec, digest, content } = stored;
  const size = Number(stored.size);
  if (owner !== watch.owner || spec !== watch.spec || !digest || !Number.isSafeInteger(size)) return undefined;
  return { owner, spec, digest, size, ...(content !== undefined ? { content } : {}) };
}

/** The input section of a changed check (the rule above). */
function changeSection(spec: string, out: ToolOutput, base: WatchBase | undefined, maxBytes: number): string {
  const n = (x: number) => x.toLocaleString('en-US');
  if (!base) return `\n\n[Watch ${spec}: first run of the watched check. Its output (${n(out.bytes)} bytes):]\n${out.render().content}`;
  const appended = out.appendedTo(base.digest);
  if (appended) {
    const first = appended.firstLine;
    const lines = first !== undefined && out.lines !== undefined ? ` (lines ${n(first)}–${n(out.lines)})` : '';
    return `\n\n[Watch ${spec}: changed since it was last seen: ${n(appended.bytes)} bytes appended${lines}, ${n(out.bytes)} bytes in all. What was appended:]\n${appended.render().content}`;
  }
  const now = out.kept();
  if (base.content !== undefined && now !== undefined) {
    // Each edit takes at least two bytes of the diff: a longer edit script would not fit anyway.
    const patch = createTwoFilesPatch('then', 'now', base.content, now, undefined, undefined, {
      context: 3,
      maxEditLength: Math.floor(maxBytes / 2),
    });
    if (patch !== undefined && Buffer.byteLength(patch) <= maxBytes) {
      const diff = patch.replace(/^=+\n/, '');
      return `\n\n[Watch ${spec}: changed since it was last seen. Unified diff of its output then and now:]\n${diff}`;
    }
  }
  return `\n\n[Watch ${spec}: changed since it was last seen (more than a diff can show). Its output now (${n(out.bytes)} bytes):]\n${out.render().content}`;
}
