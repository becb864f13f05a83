/**
 * What is done ahead for an occurrence held until its due time — a read started when its job was
 * fetched, a claim set for `worker.claim_lead_ms` before the due time — kept by job until the due time
 * takes it or the occurrence ends without its turn. The rules of what each kind claims ahead are its own
 * (`loop/claim-ahead.ts`, `cron/cron-claim-ahead.ts`); this is their bookkeeping.
 */
import type { Job } from 'bullmq';
import type { HeldLock } from '../runtime/session-lock.ts';
import { callAt } from '../runtime/sleep-until.ts';
import type { WorkerDeps } from '../worker-deps.ts';

/** A claim made ahead that answered `ok`: it holds the turn lock (`null`: a cron job with `--overlap allow`). */
export interface ClaimMadeAhead {
  lock: HeldLock | null;
  /** Cancel what the claim set up for the due time (the occurrence ends without its turn). */
  cancel?: () => void;
}

interface Ahead<R, C extends ClaimMadeAhead> {
  deps: WorkerDeps;
  /** What was read when the job was fetched (the kind's own). */
  read: R;
  /** The claim, once its time came: `undefined` when it was not made or did not answer `ok`. */
  claim?: Promise<C | undefined>;
  /** Cancel the claim's timer. */
  cancel: () => void;
}

/**
 * Held occurrences' work ahead, by job (BullMQ hands the processor the job object that was fetched,
 * so a job put back and fetched again starts with nothing).
 * @typeParam R - what the kind reads when the job is fetched
 * @typeParam C - what its claim ahead answers when it is made
 */
export class WorkAhead<R, C extends ClaimMadeAhead> {
  private readonly of = new WeakMap<Job, Ahead<R, C>>();

  /**
   * Keep `read` for `job` and call `claim` at `claimAt` (epoch ms; `undefined`: no claim ahead). A claim
   * that throws counts as not made: the due time claims the occurrence (or tells the error there).
   */
  set(deps: WorkerDeps, job: Job, read: R, claimAt: number | undefined, claim: (read: R) => Promise<C | undefined>): void {
    const ahead: Ahead<R, C> = { deps, read, cancel: () => {} };
    if (claimAt !== undefined)
      ahead.cancel = callAt(claimAt, () => {
        ahead.claim = claim(read).catch(() => undefined);
      });
    this.of.set(job, ahead);
  }

  /** What was done ahead for `job`, at its due time, once: the read and the claim if made (one in flight is waited for). */
  async take(job: Job): Promise<{ read: R; claimed: C | undefined } | undefined> {
    const ahead = this.of.get(job);
    if (!ahead) return undefined;
    this.of.delete(job);
    ahead.cancel();
    return { read: ahead.read, claimed: await ahead.claim };
  }

  /**
   * The occurrence ends without its turn here: cancel its claim if not made yet. `handedBack` (the drain
   * hands it back before its turn): the turn lock the claim took is released too — not for a job whose
   * lock was lost (the lock's holder is the job, which another worker runs now; its claim is its own retry).
   */
  async drop(job: Job, handedBack: boolean): Promise<void> {
    const ahead = this.of.get(job);
    if (!ahead) return;
    this.of.delete(job);
    ahead.cancel();
    ahead.deps.turns.forgetClaimedAhead(job.id!);
    const claimed = await ahead.claim;
    claimed?.cancel?.();
    if (handedBack) await claimed?.lock?.release();
    else claimed?.lock?.releasedElsewhere(); // stop renewing it
  }
}
