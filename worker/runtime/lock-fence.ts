/**
 * Self-fencing (docs/RELIABILITY.md, "A worker that cannot renew a job's lock stops its turn first"):
 * this process knows, for each job it runs, until when the job's BullMQ lock surely lasts — the
 * time the last renewal that was taken was *sent* (or the fetch that set the lock), plus
 * `worker.lock_duration_ms`; the lock was written after that, so it lasts at least that long. When
 * that time comes within `worker.fence_margin_ms` with no newer renewal taken (Redis unreachable, a
 * partition, renewals stalled), the job is fenced: its turn is aborted and its commands killed before
 * the lock can lapse and another worker take the job over, so the two never overlap.
 *
 * What it cannot fence: a process that does not run at all past the margin (SIGSTOP, an event loop
 * blocked for longer): its timer fires only when it runs again.
 */

/** One timer per job, reset by every renewal that was taken. */
export class LockFence {
  private readonly leases = new Map<string, { until: number; timer: NodeJS.Timeout }>();

  /**
   * @param marginMs - how long before the lock surely lapses the job is fenced (`worker.fence_margin_ms`)
   * @param fence - called once per lease that ran out: abort the job's turn here
   */
  constructor(
    private readonly marginMs: number,
    private readonly fence: (jobId: string, heldUntil: number) => void,
  ) {}

  /** Job `jobId`'s lock surely lasts until `until` (epoch ms); an earlier time than one known already changes nothing. */
  heldUntil(jobId: string, until: number): void {
    const had = this.leases.get(jobId);
    if (had && had.until >= until) return;
    if (had) clearTimeout(had.timer);
    const timer = setTimeout(
      () => {
        this.leases.delete(jobId);
        this.fence(jobId, until);
      },
      Math.max(0, until - this.marginMs - Date.now()),
    );
    timer.unref();
    this.leases.set(jobId, { until, timer });
  }

  /** The job ended in this process (or was moved on): it is not fenced. */
  forget(jobId: string): void {
    const had = this.leases.get(jobId);
    if (had) clearTimeout(had.timer);
    this.leases.delete(jobId);
  }

  /** Stop every timer. */
  close(): void {
    for (const { timer } of this.leases.values()) clearTimeout(timer);
    this.leases.clear();
  }
}
