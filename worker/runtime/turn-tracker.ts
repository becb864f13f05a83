/**
 * Active turns of one process, by drain class (docs/DESIGN.md §9, docs/GLOSSARY.md):
 * - `deadline`: loop, heartbeat and cron ticks and `/v1` runs — may finish
 *   within `agent.cron_drain_timeout`;
 * - `chat`: user messages and goal continuations — `agent.restart_drain_timeout`.
 * Each turn has an AbortController the drain fires at its deadline.
 *
 * Also what a worker process holds and runs at once, bounded separately
 * (docs/OPERATIONS.md, "Held ticks and running turns"):
 * - **held ticks** (`worker.max_held_ticks`): jobs fetched before they are due,
 *   sleeping until their due time on one shared timer per instant (`callAt`, `sleep-until.ts`);
 *   cheap — a job object, a timer entry, and a lock that lasts past its due time without renewals
 *   (cron occurrences, ticks held up to `lock_renew_ms`: `holdLock`, `worker-process.ts`);
 * - **running turns**, in two pools of turn slots (`TurnSlots`): `agent`
 *   (`worker.max_agent_turns`: agent turns and their judges, chat messages, goal
 *   continuations, `/v1` runs, cron runs — they wait on the network) and
 *   `command` (`worker.max_command_turns`: command turns, cron scripts and command
 *   tools — processes on this host).
 * A fetched job gets a `JobTicket`: held until due, then waiting for a slot of
 * its pool, then running. The fetch policy (`JobAdmission.mayFetch`) keeps a
 * worker from fetching what it cannot start now, so an overdue backlog is
 * shared by the fleet instead of taken by the first worker to ask.
 */
import { FENCED } from './process-group.ts';
import type { TurnAbortBy, TurnAbortRequest } from '../../scheduler/session/turn-abort.ts';
import { callAt } from './sleep-until.ts';

export type DrainClass = 'deadline' | 'chat';

/** One running turn. */
export interface TrackedTurn {
  id: string;
  drainClass: DrainClass;
  controller: AbortController;
  /** Resolves when the turn's processor has finished (committed, deferred or failed). */
  done: Promise<void>;
  /** Set when the drain aborted this turn. */
  abortedByDrain: boolean;
  /**
   * Set when this worker lost the BullMQ lock of the turn's job (its renewal
   * came too late): the job may already run on another worker, so this turn
   * is aborted and must not commit anything.
   */
  lockLost: boolean;
  /**
   * Set when this worker fenced the turn off (`lock-fence.ts`): its job's lock could not be renewed
   * and would lapse soon. Like `lockLost` it commits nothing; its job is handed back when this worker
   * still can (the lock may still be its own).
   */
  fenced?: boolean;
  /** The session the turn belongs to, when the processor names it (so `/stop` can find it). */
  sessionId?: string;
  /** The occurrence a tick's turn runs (so an interrupt aimed at that tick finds only it). */
  occurrenceId?: string;
  /** Set when the turn was aborted on request: `/stop`, Ctrl+C in `hermes chat`, or `--overlap cancel_other` (see `abortTurns`). */
  stoppedBy?: TurnAbortBy;
}

/** The pool of turn slots a turn runs in. */
export type TurnPool = 'agent' | 'command';

/** Every pool, in the order the fetch policy looks at them. */
export const TURN_POOLS: readonly TurnPool[] = ['agent', 'command'];

/** What one worker process holds and runs at once (`worker.max_*`); unbounded when not given. */
export interface TurnLimits {
  /** Fetched jobs sleeping until they are due (`worker.max_held_ticks`). */
  heldTicks: number;
  /** Turns in the `agent` pool (`worker.max_agent_turns`). */
  agent: number;
  /** Turns in the `command` pool (`worker.max_command_turns`). */
  command: number;
}

const UNBOUNDED: TurnLimits = { heldTicks: Infinity, agent: Infinity, command: Infinity };

/** A slot of a pool, held until `release()` (idempotent). */
export interface TurnSlot {
  readonly pool: TurnPool;
  release(): void;
}

interface SlotWaiter {
  grant: (slot: TurnSlot) => void;
}

/**
 * Two counting semaphores, one per pool, handed out first come, first served. A waiter whose
 * signal aborts leaves the queue (its promise rejects with the signal's reason).
 */
export class TurnSlots {
  private readonly runningBy: Record<TurnPool, number> = { agent: 0, command: 0 };
  private readonly peakBy: Record<TurnPool, number> = { agent: 0, command: 0 };
  private readonly queues: Record<TurnPool, SlotWaiter[]> = { agent: [], command: [] };

  constructor(
    private readonly limits: Pick<TurnLimits, TurnPool>,
    /** Called whenever a slot is taken or given back (the fetch loops look again). */
    private readonly changed: () => void = () => {},
  ) {}

  /** Turns of `pool` running now. */
  running(pool: TurnPool): number {
    return this.runningBy[pool];
  }

  /** Most turns of `pool` that ran at once since this process started. */
  peak(pool: TurnPool): number {
    return this.peakBy[pool];
  }

  /** Slots of `pool` free now (no one waits for them). */
  free(pool: TurnPool): number {
    return Math.max(0, this.limits[pool] - this.runningBy[pool] - this.queues[pool].length);
  }

  /** The limit of `pool`. */
  limit(pool: TurnPool): number {
    return this.limits[pool];
  }

  /** A slot of `pool` now, or `undefined` when none is free. */
  tryAcquire(pool: TurnPool): TurnSlot | undefined {
    if (this.free(pool) <= 0) return undefined;
    return this.take(pool);
  }

  /**
   * A slot of `pool`, waiting for one in order of asking.
   * @throws the reason of `signal` when it aborts first
   */
  async acquire(pool: TurnPool, signal?: AbortSignal): Promise<TurnSlot> {
    const now = this.tryAcquire(pool);
    if (now) return now;
    signal?.throwIfAborted();
    return await new Promise<TurnSlot>((resolve, reject) => {
      const onAbort = () => {
        leave();
        reject(signal!.reason);
      };
      const leave = this.wait(pool, (slot) => {
        signal?.removeEventListener('abort', onAbort);
        resolve(slot);
      });
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * Wait in line for a slot of `pool`: `grant` is called with it when it is this waiter's turn. No signal: a
   * job waiting for its slot (`JobTicket.ready`, thousands at the top of the hour) leaves the line by the answer.
   * @returns leave the line: true when it was still waiting (`grant` is then never called)
   */
  wait(pool: TurnPool, grant: (slot: TurnSlot) => void): () => boolean {
    const waiter: SlotWaiter = { grant };
    this.queues[pool].push(waiter);
    return () => {
      const queue = this.queues[pool];
      const i = queue.indexOf(waiter);
      if (i < 0) return false;
      queue.splice(i, 1);
      return true;
    };
  }

  private take(pool: TurnPool): TurnSlot {
    this.runningBy[pool]++;
    this.peakBy[pool] = Math.max(this.peakBy[pool], this.runningBy[pool]);
    let released = false;
    this.changed();
    return {
      pool,
      release: () => {
        if (released) return;
        released = true;
        this.runningBy[pool]--;
        // Hand the slot straight to the next waiter, if any.
        const next = this.queues[pool].shift();
        if (next) next.grant(this.take(pool));
        else this.changed();
      },
    };
  }
}

/** How a ticket's wait ended: run it, hand it back (drain), or leave it (its lock was lost: another worker has the job). */
export type TicketWait = 'run' | 'drain' | 'lost';

/**
 * One fetched job of this process, from its fetch to its end: held until its due time (when it
 * came early), then waiting for a slot of its pool, then running with it. Kept small: a held tick
 * is a callback on the shared timer of its due instant (`callAt`), no promise chain or signal of its own.
 */
export class JobTicket {
  phase: 'held' | 'starting' | 'running' | 'ended';
  /** Set when it was held or waited for its slot (its job lock is checked before it runs). */
  waited = false;
  private slot: TurnSlot | undefined;
  /** Ends the current wait early (`interrupt`). */
  private endWait: (() => void) | undefined;
  private stopReason: 'drain' | 'lost' | undefined;
  private finish: (() => void) | undefined;
  private ended: Promise<void> | undefined;

  constructor(
    readonly jobId: string,
    readonly pool: TurnPool,
    /** Epoch ms the job is due; `undefined`: due now. */
    readonly dueAt: number | undefined,
    private readonly admission: JobAdmission,
  ) {
    if (dueAt !== undefined && dueAt > Date.now()) {
      this.phase = 'held';
      this.waited = true;
      admission.peakHeld = Math.max(admission.peakHeld, ++admission.held);
    } else {
      this.slot = admission.slots.tryAcquire(pool);
      this.phase = this.slot ? 'running' : 'starting';
      if (!this.slot) {
        this.waited = true;
        admission.starting++;
      }
    }
  }

  /** Resolves when the ticket ends (made on first use). */
  get done(): Promise<void> {
    if (this.phase === 'ended') return Promise.resolve();
    this.ended ??= new Promise<void>((r) => (this.finish = r));
    return this.ended;
  }

  /** End the wait: the drain hands it back, or its lock was lost. No-op once it runs. */
  interrupt(reason: 'drain' | 'lost'): boolean {
    if (this.phase !== 'held' && this.phase !== 'starting') return false;
    this.stopReason ??= reason;
    this.endWait?.();
    return true;
  }

  /**
   * Wait until the job may run: its due time, then a slot of its pool.
   * @param woke - called when a held job's due time came and it goes on to wait for its slot and run (not when handed back or lost)
   */
  async ready(woke?: () => void): Promise<TicketWait> {
    if (this.phase === 'held' && !this.stopReason) {
      // Prefetch lead (`scheduler/loop/prefetch-lead.ts`): one timer per due instant for every held tick.
      await new Promise<void>((resolve) => {
        const cancel = callAt(this.dueAt!, resolve);
        this.endWait = () => {
          cancel();
          resolve();
        };
      });
      this.endWait = undefined;
    }
    if (this.phase === 'held') {
      this.admission.held--;
      if (this.stopReason) return this.end(this.stopReason);
      woke?.();
      this.slot = this.admission.slots.tryAcquire(this.pool);
      this.phase = this.slot ? 'running' : 'starting';
      if (!this.slot) this.admission.starting++;
      this.admission.changed();
    }
    if (this.phase === 'starting') {
      // A slot free now is taken even when the wait was ended before; otherwise it waits in line until given one
      // or until `interrupt` or `release` take it out of the line.
      const { slots } = this.admission;
      let slot = slots.tryAcquire(this.pool);
      if (!slot && !this.stopReason) {
        slot = await new Promise<TurnSlot | undefined>((resolve) => {
          const leave = slots.wait(this.pool, resolve);
          this.endWait = () => {
            if (leave()) resolve(undefined);
          };
        });
        this.endWait = undefined;
      }
      this.admission.starting--;
      if (!slot) return this.end(this.stopReason ?? 'drain');
      this.slot = slot;
      this.phase = 'running';
    }
    return this.phase === 'running' ? 'run' : (this.stopReason ?? 'drain');
  }

  private end(reason: 'drain' | 'lost'): TicketWait {
    this.phase = 'ended';
    this.admission.changed();
    return reason;
  }

  /**
   * Its turn ended (the runner returned or threw; its commit may still be in flight): the slot goes to the
   * next job waiting for one now. A slot bounds what waits on a model endpoint or runs as a process on this
   * host, not the Redis writes after it; the drain still waits for the commit (`TurnTracker.run`).
   */
  turnEnded(): void {
    this.slot?.release();
    this.slot = undefined;
  }

  /** Give back its slot (or its place) once its job's processing ended. Idempotent. */
  release(): void {
    if (this.phase === 'held') this.admission.held--;
    if (this.phase === 'starting') this.admission.starting--;
    this.phase = 'ended';
    this.endWait?.();
    this.slot?.release();
    this.slot = undefined;
    this.admission.forget(this);
    this.finish?.();
    this.admission.changed();
  }
}

/**
 * What this process holds and may fetch: held ticks, jobs waiting for a slot, fetches in
 * flight, and the turn slots. One per process, shared by the fetch loops of every queue and shard.
 */
export class JobAdmission {
  /** Jobs sleeping until their due time. */
  held = 0;
  /** Most jobs held at once since this process started. */
  peakHeld = 0;
  /** Jobs due that wait for a slot of their pool. */
  starting = 0;
  /** Fetches in flight (each may bring a job due now). */
  fetching = 0;
  /** Fetches in flight of queues whose jobs may come early and be held (`ticks`). */
  fetchingHoldable = 0;
  readonly slots: TurnSlots;
  private readonly tickets = new Map<string, JobTicket>();
  private waiters: Array<() => void> = [];

  constructor(readonly limits: TurnLimits) {
    this.slots = new TurnSlots(limits, () => this.changed());
  }

  /**
   * The fetch policy: fetch another job only while
   *  - for a queue whose jobs may come early, held ticks and its fetches in flight stay under
   *    `worker.max_held_ticks` (the job may be held), and
   *  - no fetched job is waiting for a slot, and a slot of a pool the queue's jobs run in is free for
   *    every fetch in flight (the job may be due now): a worker does not fetch more overdue work than it
   *    can start now, so the fleet shares a backlog.
   * @param pools - the pools a job of the queue may need (`ticks`: both; inbox, `/v1`: agent)
   * @param holdable - the queue's jobs may come early and be held (`ticks`)
   */
  mayFetch(pools: readonly TurnPool[], holdable: boolean): boolean {
    if (holdable && this.held + this.fetchingHoldable >= this.limits.heldTicks) return false;
    if (this.starting > 0) return false;
    return pools.some((p) => this.slots.free(p) > this.fetching);
  }

  /** A fetch is in flight (until `fetchEnded`). */
  fetchStarted(holdable: boolean): void {
    this.fetching++;
    if (holdable) this.fetchingHoldable++;
  }

  /** A fetch ended (its job, if any, has its ticket). */
  fetchEnded(holdable: boolean): void {
    this.fetching--;
    if (holdable) this.fetchingHoldable--;
    this.changed();
  }

  /**
   * Resolves at the next change of what `mayFetch` looks at (`changed`; whoever stops the fetch
   * loops calls it too). No listener per call: a burst makes thousands of changes.
   */
  whenChanged(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.waiters.push(resolve);
    });
  }

  /** Tell the fetch loops to look again. */
  changed(): void {
    if (this.waiters.length === 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /**
   * A ticket for a fetched job (held when `dueAt` is in the future, else running or waiting for a slot).
   * A job whose earlier copy still has a ticket here (its lock lapsed and this process fetched it again)
   * gets a ticket once that one ended: `previous` resolves then.
   */
  admit(jobId: string, pool: TurnPool, dueAt: number | undefined): { ticket: JobTicket; previous: Promise<void> | undefined } {
    const previous = this.tickets.get(jobId);
    previous?.interrupt('lost');
    const ticket = new JobTicket(jobId, pool, dueAt, this);
    this.tickets.set(jobId, ticket);
    this.changed();
    return { ticket, previous: previous?.done };
  }

  /** The ticket of job `jobId`, if this process has one. */
  ticket(jobId: string): JobTicket | undefined {
    return this.tickets.get(jobId);
  }

  /** Tickets not yet running (held or waiting for a slot). */
  waiting(): JobTicket[] {
    return [...this.tickets.values()].filter((t) => t.phase === 'held' || t.phase === 'starting');
  }

  /** Every ticket not ended. */
  all(): JobTicket[] {
    return [...this.tickets.values()];
  }

  /** @internal a ticket that ended */
  forget(ticket: JobTicket): void {
    if (this.tickets.get(ticket.jobId) === ticket) this.tickets.delete(ticket.jobId);
  }
}

/** Registry of this process's running turns, by drain class, with their AbortControllers. */
export class TurnTracker {
  private readonly active = new Map<string, TrackedTurn>();
  /** Ticks claimed ahead of their due time whose turns are yet to start, by job id (`claimedAhead`). */
  private readonly ahead = new Map<string, { sessionId: string; occurrenceId: string; stoppedBy?: TurnAbortBy }>();
  /** Held ticks, jobs waiting for a slot, and the turn slots (`worker.max_*`). */
  readonly admission: JobAdmission;
  /**
   * Set when this process starts draining. A paused BullMQ worker can still
   * receive one job from a blocking fetch that was in flight; processors that
   * hand work back check this and hand such a job back at once.
   */
  draining = false;

  /** @param limits - what the process holds and runs at once; default unbounded (deps built without a process) */
  constructor(limits: TurnLimits = UNBOUNDED) {
    this.admission = new JobAdmission(limits);
  }

  /** The turn slots of both pools. */
  get slots(): TurnSlots {
    return this.admission.slots;
  }

  /**
   * Run `fn` as a tracked turn.
   * @param parentSignal - the BullMQ job's own signal, if any; it also aborts the turn
   */
  async run<T>(
    id: string,
    drainClass: DrainClass,
    fn: (signal: AbortSignal, turn: TrackedTurn) => Promise<T>,
    parentSignal?: AbortSignal,
  ): Promise<T> {
    const controller = new AbortController();
    const onParent = () => controller.abort(parentSignal?.reason);
    parentSignal?.addEventListener('abort', onParent, { once: true });
    let finish!: () => void;
    const turn: TrackedTurn = {
      id,
      drainClass,
      controller,
      done: new Promise<void>((r) => (finish = r)),
      abortedByDrain: false,
      lockLost: false,
    };
    this.active.set(id, turn);
    // A `/stop` that came between its claim ahead of the due time and now (`claimedAhead`).
    const ahead = this.ahead.get(id);
    this.ahead.delete(id);
    if (ahead?.stoppedBy) {
      turn.stoppedBy = ahead.stoppedBy;
      controller.abort(new Error('stopped by the user'));
    }
    try {
      return await fn(controller.signal, turn);
    } finally {
      parentSignal?.removeEventListener('abort', onParent);
      this.active.delete(id);
      finish();
    }
  }

  /**
   * Whether `signal` is the signal of a running turn that holds a slot of the `command` pool (a
   * command turn): a command tool it calls (`--watch`) runs within that slot instead of waiting for a
   * second one, which a full pool would never give it.
   */
  holdsCommandSlot(signal: AbortSignal): boolean {
    for (const turn of this.active.values()) {
      if (turn.controller.signal === signal) return this.admission.ticket(turn.id)?.pool === 'command';
    }
    return false;
  }

  /**
   * Tick `id` (a job id) of `sessionId` was claimed ahead of its due time (`worker/loop/claim-ahead.ts`) and its
   * turn is yet to start: a `/stop` until then (`abortTurns`) stops that turn as it starts (`run`).
   */
  claimedAhead(id: string, sessionId: string, occurrenceId: string): void {
    this.ahead.set(id, { sessionId, occurrenceId });
  }

  /** The tick claimed ahead will not start here (`claimedAhead`). */
  forgetClaimedAhead(id: string): void {
    this.ahead.delete(id);
  }

  /**
   * Abort the turns a user's request names (`scheduler/session/turn-abort.ts`, published on
   * `Keys.turnAbortChannel`): every turn of the session, or only the one of
   * `occurrenceId`. Only turns that set `sessionId` (and `occurrenceId`) are found.
   * @returns how many were aborted
   */
  abortTurns(request: TurnAbortRequest): number {
    let n = 0;
    for (const claimed of this.ahead.values()) {
      if (claimed.sessionId !== request.sessionId || claimed.stoppedBy) continue;
      if (request.occurrenceId !== undefined && claimed.occurrenceId !== request.occurrenceId) continue;
      claimed.stoppedBy = request.by;
      n++;
    }
    for (const turn of this.active.values()) {
      if (turn.sessionId !== request.sessionId || turn.controller.signal.aborted) continue;
      if (request.occurrenceId !== undefined && turn.occurrenceId !== request.occurrenceId) continue;
      turn.stoppedBy = request.by;
      turn.controller.abort(new Error(request.by === 'overlap' ? 'cancelled for a newer occurrence' : 'stopped by the user'));
      n++;
    }
    return n;
  }

  /**
   * The BullMQ lock of job `id` was lost (see `TrackedTurn.lockLost`): abort its turn, or end its
   * wait when it is held or waiting for a slot (it never runs here).
   * @returns whether such a turn or ticket was found
   */
  abortLockLost(id: string): boolean {
    const turn = this.active.get(id);
    if (!turn) return this.admission.ticket(id)?.interrupt('lost') ?? false;
    turn.lockLost = true;
    turn.controller.abort(new Error('job lock lost'));
    return true;
  }

  /**
   * Fence off job `id`'s turn (`lock-fence.ts`): abort it with `FENCED`, so its commands are killed
   * at once, before its lock can lapse.
   * @returns whether a running turn was found (and not aborted already)
   */
  fence(id: string): boolean {
    const turn = this.active.get(id);
    if (!turn || turn.controller.signal.aborted) return false;
    turn.fenced = true;
    turn.lockLost = true;
    turn.controller.abort(FENCED);
    return true;
  }

  /** Active turns, optionally of one class. */
  list(drainClass?: DrainClass): TrackedTurn[] {
    return [...this.active.values()].filter((t) => drainClass === undefined || t.drainClass === drainClass);
  }

  get size(): number {
    return this.active.size;
  }
}
