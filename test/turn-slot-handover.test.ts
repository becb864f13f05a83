/**
 * A turn's slot goes to the next job waiting once the turn ended, before its commit
 * (`JobTicket.turnEnded`, `worker/runtime/turn-tracker.ts`; docs/OPERATIONS.md, "Turn slots"): the pool
 * still never runs more turns than its limit, and giving the slot back twice frees one slot, not two.
 */
import { describe, it, expect } from 'vitest';
import { JobAdmission } from '../worker/runtime/turn-tracker.ts';

const limits = { heldTicks: 10, agent: 1, command: 1 };

describe("turn slots: handed over at the turn's end", () => {
  it('a waiting job gets the slot when the running turn ends, while that job is still committing; its release then frees nothing more', async () => {
    const admission = new JobAdmission(limits);
    const a = admission.admit('a', 'agent', undefined).ticket;
    const b = admission.admit('b', 'agent', undefined).ticket;
    const c = admission.admit('c', 'agent', undefined).ticket;
    expect(await a.ready()).toBe('run');
    let bRuns = false;
    const bReady = b.ready().then((w) => ((bRuns = true), w));
    let cRuns = false;
    void c.ready().then(() => (cRuns = true));
    await new Promise((r) => setImmediate(r));
    expect(bRuns).toBe(false); // one slot: a holds it
    expect(admission.slots.free('agent')).toBe(0);
    a.turnEnded(); // a's turn ended; its commit is still to come
    expect(await bReady).toBe('run');
    expect(cRuns).toBe(false);
    a.release(); // a's job ends: its slot was already given back
    a.turnEnded();
    await new Promise((r) => setImmediate(r));
    expect(cRuns).toBe(false); // still one turn at a time
    expect(admission.slots.free('agent')).toBe(0);
    b.release();
    await new Promise((r) => setImmediate(r));
    expect(cRuns).toBe(true);
    c.release();
    expect(admission.slots.free('agent')).toBe(1);
  });
});
