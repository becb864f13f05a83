/** Key and job id spelling (scheduler/store/keys.ts). */
import { describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { strict as assert } from 'node:assert';
import fc from 'fast-check';
import { bullJobId, compositeId, fromKeyPart, keyPart, Keys } from '../scheduler/store/keys.ts';
import type { LoopKind } from '../scheduler/tick/tick-kind.ts';
import { inboxJobId, inputOccurrenceId } from '../scheduler/session/inbox.ts';
import { outboundJobId } from '../scheduler/delivery/outbound.ts';
import { cronOccurrenceId, cronSessionId } from '../scheduler/cron/cron-job.ts';
import { testEnv } from './support/env.ts';
import { openTestClients, startWorkerStack, waitForEvents } from './support/stack.ts';
import { cleanupAfterEach } from './support/cleanup.ts';

const k = new Keys('{hermes}');

/** Every key that belongs to one id, by the kind of thing it is. */
const PER_ID: Record<string, (id: string) => string> = {
  'loop record': (id) => k.schedule(id, 'loop'),
  'heartbeat record': (id) => k.schedule(id, 'heartbeat'),
  'loop mutation lock': (id) => k.scheduleMutation(id, 'loop'),
  'heartbeat mutation lock': (id) => k.scheduleMutation(id, 'heartbeat'),
  'loop in-flight mark': (id) => k.scheduleInflight(id, 'loop'),
  'heartbeat in-flight mark': (id) => k.scheduleInflight(id, 'heartbeat'),
  'loop watch base': (id) => k.scheduleWatchBase(id, 'loop'),
  'heartbeat watch base': (id) => k.scheduleWatchBase(id, 'heartbeat'),
  'cron watch base': (id) => k.cronWatchBase(id),
  'cron children': (id) => k.cronChildren(id),
  goal: (id) => k.goal(id),
  transcript: (id) => k.transcript(id),
  events: (id) => k.events(id),
  'turn lock': (id) => k.turnLock(id),
  'turn journal': (id) => k.turnJournal(id, 'loop:s:1'),
  'pending input': (id) => k.pendingInput(id),
  'input sequence': (id) => k.inputSequence(id),
  'session committed occurrences': (id) => k.sessionCommitted(id),
  'agent schedules created': (id) => k.agentSchedulesCreated(id),
  'cron claims': (id) => k.cronClaims(id),
  'cron committed occurrences': (id) => k.cronCommitted(id),
  'outbound sent': (id) => k.outboundSent(id),
  'cron job': (id) => k.cronJob(id),
  'cron runs': (id) => k.cronRuns(id),
  'cron run index': (id) => k.cronRunIndex(id),
  run: (id) => k.run(id),
  'run events': (id) => k.runEvents(id),
  'run idempotency': (id) => k.runIdempotency(id),
  'telegram poll lease': (id) => k.telegramPollLease(id),
  'telegram offset': (id) => k.telegramOffset(id),
  'gateway wake': (id) => k.gatewayWake(id),
  'gateway platforms': (id) => k.gatewayPlatforms(id),
  'outbound order of a chat': (id) => k.outboundOrder('telegram', id),
};
const GLOBAL = [
  k.scheduleIndex,
  k.goalIndex,
  k.sessionIndex,
  k.workers,
  k.gateways,
  k.healthProbe,
  k.cronJobIndex,
  k.cronRecentRuns,
  k.shardCountMarker,
  k.turnAbortChannel,
  k.outboundSequence,
  k.runIndex,
  k.mcpSchedulesCreated,
];
/** Job scheduler ids (BullMQ keys them as `<queue>:repeat:<id>`, their jobs as `repeat:<id>:<millis>`). */
const SCHEDULER_IDS: Record<string, (id: string) => string> = {
  loop: (id) => k.loopSchedulerId(id, 'loop'),
  heartbeat: (id) => k.loopSchedulerId(id, 'heartbeat'),
  cron: (id) => k.cronSchedulerId(id),
};

/** Ids built from the characters that separate key segments, hash tags and job id parts, plus unicode. */
const hostileId = fc.oneof(
  fc.string({
    unit: fc.constantFrom(':', '{', '}', '|', '%', '%3A', '%25', 'y', 'x', 'inflight', 'mutation', 'watch', ' ', '\n', 'é', '日', '😀'),
    maxLength: 8,
  }),
  fc.string({ unit: 'binary', maxLength: 12 }),
);
const kindName = fc.constantFrom(...Object.keys(PER_ID));
/**
 * Two ids, often related the way a forged id would be: one is the other plus a
 * `:`-separated tail made of the words keys are built from (`y` and `y:inflight`).
 */
const SEGMENT_WORDS = [
  'inflight',
  'watch',
  'mutation',
  'claim',
  'sent',
  'events',
  'transcript',
  'turn-lock',
  'pending-input',
  'input-seq',
  'runs',
  'run-index',
  'poll-lease',
  'offset',
  'loop',
  'heartbeat',
  'job',
  '1700000000000',
];
const idPair = fc.oneof(
  fc.tuple(hostileId, hostileId),
  fc.tuple(hostileId, fc.array(fc.constantFrom(...SEGMENT_WORDS), { minLength: 1, maxLength: 2 }), fc.boolean()).map(([a, tail, flip]) => {
    const b = [a, ...tail].join(':');
    return flip ? [b, a] : [a, b];
  }),
);

// Inside the properties (thousands of runs each) the checks are node:assert's: the same message on a failure,
// at a fraction of `expect`'s cost when they pass.
const cleanups = cleanupAfterEach();

describe('keys', () => {
  it('every key starts with the hash tag, so all keys share one cluster slot', () => {
    const k = new Keys('{hermes}');
    for (const key of [k.schedule('s', 'loop'), k.transcript('s'), k.events('s'), k.turnLock('s'), k.sessionCommitted('s'), k.workers]) {
      expect(key.startsWith('{hermes}:')).toBe(true);
    }
    expect(() => new Keys('hermes')).toThrow(/hash tag/);
  });

  it('keyPart is injective, reversible and never holds a separator', () => {
    fc.assert(
      fc.property(hostileId, hostileId, (a, b) => {
        assert.equal(fromKeyPart(keyPart(a)), a);
        assert.doesNotMatch(keyPart(a), /[:{}|\s]/u);
        if (a !== b) assert.notEqual(keyPart(a), keyPart(b));
      }),
      { numRuns: 2000 },
    );
    expect(keyPart('telegram.42@x_y-z')).toBe('telegram.42@x_y-z'); // ordinary ids are written unchanged
  });

  it("no two distinct (kind, id) pairs address the same key, and no id reaches under another id's key", () => {
    fc.assert(
      fc.property(kindName, kindName, idPair, (k1, k2, [id1, id2]) => {
        const a = PER_ID[k1]!(id1);
        const b = PER_ID[k2]!(id2);
        if (k1 !== k2 || id1 !== id2) assert.notEqual(a, b);
        if (id1 !== id2) assert.ok(!b.startsWith(`${a}:`));
        assert.ok(!GLOBAL.includes(a));
        assert.ok(a.startsWith('{hermes}:'));
        // A queue's keys (`<prefix>:<queue>:…`) are BullMQ's alone.
        for (const q of ['ticks', 'inbox', 'outbound-telegram', 'v1-runs']) assert.ok(!a.startsWith(`{hermes}:${q}:`));
      }),
      { numRuns: 5000 },
    );
  });

  it('the named regressions: y:inflight vs y, x:mutation vs x', () => {
    expect(k.schedule('y:inflight', 'loop')).not.toBe(k.scheduleInflight('y', 'loop'));
    expect(k.schedule('x:mutation', 'loop')).not.toBe(k.scheduleMutation('x', 'loop'));
    expect(k.cronJob('o:claims')).not.toBe(k.cronClaims('o'));
    expect(inputOccurrenceId('a:b', 'c')).not.toBe(inputOccurrenceId('a', 'b:c'));
  });

  it('job scheduler ids and their job ids stay apart for every id', () => {
    const millis = fc.integer({ min: 0, max: 2 ** 45 });
    const schedKind = fc.constantFrom(...Object.keys(SCHEDULER_IDS));
    fc.assert(
      fc.property(schedKind, schedKind, idPair, millis, millis, (s1, s2, [id1, id2], m1, m2) => {
        const a = SCHEDULER_IDS[s1]!(id1);
        const b = SCHEDULER_IDS[s2]!(id2);
        if (s1 !== s2 || id1 !== id2) assert.notEqual(a, b);
        // BullMQ: the scheduler hash is `repeat:<id>`, its jobs `repeat:<id>:<millis>`.
        assert.notEqual(`repeat:${a}:${m1}`, `repeat:${b}`);
        if (a !== b || m1 !== m2) assert.notEqual(`repeat:${a}:${m1}`, `repeat:${b}:${m2}`);
        assert.equal(k.cronOnceJobId(id1, m1).split(':').length, 3); // BullMQ accepts ':' only in three-part ids
        assert.equal(k.cronManualJobId(id1, m1).split(':').length, 3);
        assert.equal(k.cronPassedFirstJobId(id1, m1).split(':').length, 3);
      }),
      { numRuns: 3000 },
    );
  });

  it('composite ids (occurrences, custom job ids) are distinct for distinct parts', () => {
    const parts = fc.array(fc.oneof(hostileId, fc.constantFrom(...SEGMENT_WORDS)), { minLength: 1, maxLength: 4 });
    fc.assert(
      fc.property(parts, parts, (p1, p2) => {
        const same = p1.length === p2.length && p1.every((x, i) => x === p2[i]);
        if (!same) {
          assert.notEqual(compositeId(...p1), compositeId(...p2));
          assert.notEqual(bullJobId(...p1), bullJobId(...p2));
        }
        assert.ok(!bullJobId(...p1).includes(':'));
      }),
      { numRuns: 3000 },
    );
    fc.assert(
      fc.property(idPair, fc.integer({ min: 0 }), ([j1, j2], due) => {
        if (j1 !== j2) assert.notEqual(cronOccurrenceId(j1, due, 'schedule'), cronOccurrenceId(j2, due, 'schedule'));
        assert.notEqual(cronOccurrenceId(j1, due, 'schedule'), cronOccurrenceId(j2, due, 'manual'));
      }),
    );
  });

  it('index members are read back to the ids they were written from', () => {
    fc.assert(
      fc.property(hostileId, fc.constantFrom<LoopKind>('loop', 'heartbeat'), hostileId, (id, kind, occ) => {
        assert.deepEqual(k.parseScheduleIndexMember(k.scheduleIndexMember(id, kind)), { sessionId: id, kind });
        assert.deepEqual(k.parseCronRecentRunEntry(k.cronRecentRunEntry(id, occ)), { jobId: id, occurrenceId: occ });
      }),
    );
  });

  it('custom job ids never contain ":" and stay distinct', () => {
    expect(bullJobId('input', 'telegram:42:7', 'tg-1')).toBe('input|telegram%3A42%3A7|tg-1');
    expect(bullJobId('a|b', 'c')).not.toBe(bullJobId('a', 'b|c'));
    expect(outboundJobId('loop:abc:123')).not.toContain(':');
  });

  it('BullMQ accepts the ids for session ids with colons (Telegram chats and threads)', async () => {
    const env = testEnv();
    const conn = new Redis(env.redisUrl, { maxRetriesPerRequest: null });
    const q = new Queue('ids', { connection: conn, prefix: env.prefix });
    try {
      const id = inboxJobId('telegram:-1001234:55', 'tg-9');
      const job = await q.add('x', {}, { jobId: id });
      expect(job.id).toBe(id);
      const again = await q.add('x', {}, { jobId: id }); // dedupes
      expect(await q.getJobCountByTypes('waiting')).toBe(1);
      expect(again.id).toBe(id);
    } finally {
      await q.obliterate({ force: true });
      await q.close();
      conn.disconnect();
      env.cleanup();
    }
  });
});

describe("session ids that look like other sessions' keys (through the stores and a worker)", () => {
  const cmd = (text: string) => ({ kind: 'command' as const, command: `echo ${text}`, timeoutSeconds: 10 });
  const spec = (prompt: string) => ({ prompt, intervalSeconds: 60, times: null, until: null, notes: [] });

  it('a loop on "y:inflight" keeps its record when the loop of "y" ticks', async () => {
    const { c } = await startWorkerStack(cleanups);
    await c.schedules.set('y:inflight', 'loop', spec('a'), { origin: { surface: 'cli' }, runner: cmd('a') });
    await waitForEvents(c, 'y:inflight', 'reply', 1);
    await c.schedules.set('y', 'loop', spec('b'), { origin: { surface: 'cli' }, runner: cmd('b') });
    await waitForEvents(c, 'y', 'reply', 1); // y's first tick marked and cleared its in-flight mark
    expect(await c.loops.get('y:inflight', 'loop')).toMatchObject({ sessionId: 'y:inflight', status: 'active', prompt: 'a' });
    expect(await c.loops.get('y', 'loop')).toMatchObject({ sessionId: 'y', status: 'active', prompt: 'b' });
    expect((await c.loops.list()).map((r) => r.sessionId).sort()).toEqual(['y', 'y:inflight']);
  });

  it('a loop on "x:mutation" does not block changes to the loop of "x"', async () => {
    const { c } = openTestClients(cleanups);
    await c.schedules.set('x:mutation', 'loop', spec('a'), { origin: { surface: 'cli' }, runner: cmd('a') });
    const started = Date.now();
    await c.schedules.set('x', 'loop', spec('b'), { origin: { surface: 'cli' }, runner: cmd('b') });
    expect(Date.now() - started).toBeLessThan(5_000); // the mutation lock of x was free
    expect(await c.loops.get('x', 'loop')).toMatchObject({ sessionId: 'x', prompt: 'b' });
    expect(await c.loops.get('x:mutation', 'loop')).toMatchObject({ sessionId: 'x:mutation', prompt: 'a' });
  });
});

describe('sharded key space', () => {
  const sharded = new Keys('{hermes}', { shards: 6 });

  it('one shard keeps the plain prefix; N shards are {hermes:0} … {hermes:N-1}', () => {
    expect(new Keys('{hermes}').schedule('s', 'loop')).toBe('{hermes}:schedule:loop:s');
    expect(sharded.shards().map((k) => k.prefix)).toEqual([
      '{hermes:0}',
      '{hermes:1}',
      '{hermes:2}',
      '{hermes:3}',
      '{hermes:4}',
      '{hermes:5}',
    ]);
    expect(sharded.workers).toBe('{hermes}:workers'); // fleet-wide
    expect(sharded.shard(3).gateways).toBe('{hermes}:gateways');
    expect(sharded.shard(3).gatewayPlatforms('h:1:ab')).toBe('{hermes}:gateway:h%3A1%3Aab:platforms');
  });

  it('every key of a session and of a cron job (with its session stream) is on one shard, whichever builder is asked', () => {
    fc.assert(
      fc.property(hostileId, fc.integer({ min: 0, max: 5 }), (id, via) => {
        const k = sharded.shard(via);
        const home = sharded.forSession(id).prefix;
        for (const key of [
          k.schedule(id, 'loop'),
          k.scheduleInflight(id, 'heartbeat'),
          k.scheduleMutation(id, 'loop'),
          k.goal(id),
          k.transcript(id),
          k.events(id),
          k.turnLock(id),
          k.turnJournal(id, id),
          k.pendingInput(id),
          k.inputSequence(id),
          k.sessionCommitted(id),
          k.agentSchedulesCreated(id),
          k.forSession(id).scheduleIndex,
          k.forSession(id).sessionIndex,
          k.forSession(id).goalIndex,
        ]) {
          assert.ok(key.startsWith(`${home}:`));
        }
        const job = sharded.forCronJob(id).prefix;
        for (const key of [
          k.cronJob(id),
          k.cronRuns(id),
          k.cronRunIndex(id),
          k.cronClaims(id),
          k.cronCommitted(id),
          k.events(cronSessionId(id)),
          k.turnJournal(cronSessionId(id), id),
          k.forCronJob(id).cronJobIndex,
          k.forCronJob(id).cronRecentRuns,
        ]) {
          assert.ok(key.startsWith(`${job}:`));
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('sessions spread over the shards (stable FNV-1a of the id)', () => {
    const counts = new Array(6).fill(0);
    for (let i = 0; i < 6000; i++) counts[sharded.shardOfSession(`session-${i}`)]++;
    for (const n of counts) expect(n).toBeGreaterThan(800);
    expect(sharded.shardOfSession('main')).toBe(new Keys('{other}', { shards: 6 }).shardOfSession('main'));
  });
});
