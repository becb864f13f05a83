/**
 * The hand-off from a cron run to the jobs that run after it (`--after`, docs/CRON.md, "Jobs that run after
 * jobs"). Exactly once per parent run, across a fleet and a crash:
 *
 *   1. which children a run starts is decided before its commit and written in its run record (`CronRun.handoff`),
 *      so it is part of the commit's one atomic step: a run either is recorded with its hand-off or not at all;
 *   2. after the commit each child's run is queued with a BullMQ job id made from the child and the parent run
 *      (`CronStore.enqueueAfter`), and its occurrence id is made from them too (`cronAfterOccurrenceId`);
 *   3. a parent job retried after the commit (a worker killed between the commit and the queueing, a lost lock,
 *      a duplicate) finds the run committed and queues the hand-off again from the record: BullMQ keeps one job
 *      per id, and past the queue's retention the child's claim finds its occurrence committed.
 *
 * A child that waits for all its parents (`--after-all`) gets the run joined to its window instead, and its own
 * run is queued once every parent has one there (`joinAfterAll`).
 */
import { afterMatches, boundParentOutput, type ParentRunContext } from '../../scheduler/cron/cron-after.ts';
import type { CronJob, CronRun } from '../../scheduler/cron/cron-job.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/**
 * The ids of the jobs a run of `parent` starts: those listed as running after it whose record names it with an
 * outcome the run has (`afterMatches`).
 */
export async function handoffTargets(deps: WorkerDeps, parent: CronJob, run: CronRun): Promise<string[]> {
  if (run.status !== 'ok' && run.status !== 'error') return [];
  const ids = await deps.cron.children(parent.id);
  const out: string[] = [];
  for (const id of ids.sort()) {
    const child = await deps.cron.get(id);
    const link = child?.after?.find((a) => a.job_id === parent.id);
    if (link && afterMatches(link.on, run)) out.push(id);
  }
  return out;
}

/**
 * Queue the runs a committed run hands off to (`run.handoff`), each once by its id; a child removed meanwhile is
 * passed over (its run would be dropped anyway).
 */
export async function handOff(deps: WorkerDeps, parent: CronJob, run: CronRun): Promise<void> {
  if (!run.handoff?.length || (run.status !== 'ok' && run.status !== 'error')) return;
  const text = run.status === 'ok' ? (run.delivery_text ?? run.output ?? '') : (run.error ?? run.output ?? '');
  const dueAt = run.finished_at ?? run.due_at;
  const context: ParentRunContext = {
    endedAt: dueAt,
    jobId: parent.id,
    name: parent.name,
    occurrenceId: run.occurrence_id,
    status: run.status,
    ...boundParentOutput(text, deps.config.cron.after_output_max_chars),
  };
  for (const id of run.handoff) {
    const child = await deps.cron.get(id);
    if (!child) continue;
    const jobId = child.after_all ? await joinAfterAll(deps, child, context, dueAt) : await deps.cron.enqueueAfter(child, context, dueAt);
    deps.log.info(
      { cronJobId: id, parentJobId: parent.id, parentOccurrenceId: run.occurrence_id, jobId: jobId ?? null },
      jobId ? 'cron run handed off' : 'cron run joined the window of a job after all its parents',
    );
  }
}

/**
 * `--after-all`: the parent's run joins the child's window; once every parent of the child has a run waiting there,
 * the child's run is queued with them and takes them out of the window (`CronStore.enqueueAfterAll`). Each step is
 * idempotent, so a hand-off made again (a retried parent job) or two parents handing off at once queue one run.
 * @returns the child's BullMQ job id when its run was queued, else `undefined` (parents still to run)
 */
async function joinAfterAll(deps: WorkerDeps, child: CronJob, context: ParentRunContext, dueAt: number): Promise<string | undefined> {
  const waiting = await deps.cron.joinAfterAll(child.id, context, dueAt);
  // A parent removed meanwhile is waited for no more (its record is gone; the child's still names it).
  const named = (child.after ?? []).map((a) => a.job_id).sort();
  const parents: string[] = [];
  for (const p of named) if (waiting.has(p) || (await deps.cron.get(p)) !== null) parents.push(p);
  if (!parents.every((p) => waiting.has(p))) return undefined;
  return await deps.cron.enqueueAfterAll(
    child,
    parents.map((p) => waiting.get(p)!),
    dueAt,
  );
}
