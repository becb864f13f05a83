/**
 * What the fleet knows of each endpoint and model: the window learned from its refusals
 * (`model-window.ts`) and its circuit breaker (`circuit-breaker.ts`). In Redis
 * (`RedisModelState`) every worker shares them and they outlive restarts; a runner with no Redis
 * (a benchmark, a test of the runner alone) keeps them in its own memory (`MemoryModelState`).
 */
import { StoreUnavailableError } from '../errors/store-unavailable-error.ts';
import type { Keys } from '../store/keys.ts';
import { CONFLICT, retryOnConflict } from '../store/optimistic-retry.ts';
import type { RedisClient } from '../store/redis/connection-factory.ts';
import { putVersioned } from '../store/versioned-json.ts';
import type { BreakerRecord } from './circuit-breaker.ts';
import { mergeLearned, type LearnedWindow } from './model-window.ts';

/** A model at an endpoint: the endpoint's base URL as the client calls it, and the model id sent to it. */
export interface ModelRef {
  endpoint: string;
  model: string;
}

/** The base URL the `openai` client calls when none is set. */
const OPENAI_DEFAULT_BASE_URL = 'https://api.openai.com/v1';

/**
 * The endpoint a model's state is stored by: its base URL without trailing slashes (the `openai`
 * client's default when unset), or undefined when no endpoint is configured at all.
 */
export function endpointOf(baseUrl: string | undefined, apiKey: string | undefined): string | undefined {
  if (!baseUrl && !apiKey) return undefined;
  return (baseUrl || OPENAI_DEFAULT_BASE_URL).replace(/\/+$/, '');
}

/** What is stored of one endpoint and model. */
export interface ModelState {
  window?: LearnedWindow;
  breaker?: BreakerRecord;
}

/** The learned windows and breakers of the fleet. */
export interface ModelStateStore {
  /** The state of one endpoint and model (one round trip, or a share of one: `RedisModelState`). Not to be changed. */
  read(ref: ModelRef): Promise<ModelState>;
  /** Every endpoint and model with a stored state. */
  list(): Promise<Array<ModelRef & ModelState>>;
  /** Learn `proposal` (merged with what is stored: `mergeLearned`). @returns what is stored after */
  learnWindow(ref: ModelRef, proposal: LearnedWindow): Promise<LearnedWindow>;
  /**
   * Change the breaker record over the version read: `change` gets the stored record and returns
   * the new one, or undefined to leave it (then nothing is written).
   * @returns what `change` returned on the attempt that was written (or left alone)
   */
  updateBreaker<T>(ref: ModelRef, change: (current: BreakerRecord | undefined) => { next?: BreakerRecord; result: T }): Promise<T>;
  /** Forget what was learned and the breaker of one endpoint and model. @returns whether anything was stored */
  forget(ref: ModelRef): Promise<boolean>;
}

/**
 * The state in Redis (keys: `Keys.modelWindow`, `Keys.modelBreaker`, `Keys.modelIndex`).
 *
 * A read asked for while another read of the same model is on its way shares that read's answer (its objects are
 * not to be changed): the agent turns that start together at the top of the hour read their model's state
 * once, not once each. The answer is then as fresh as a read sent a moment earlier, which another worker's
 * write could have missed the same way; a write through this store is never missed by a read asked for
 * after it ended (a read on its way is no longer shared once the write has ended).
 */
export class RedisModelState implements ModelStateStore {
  /** Reads on their way, by model (`Keys.modelIndexMember`). */
  private readonly reading = new Map<string, Promise<ModelState>>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  read(ref: ModelRef): Promise<ModelState> {
    const id = this.keys.modelIndexMember(ref.endpoint, ref.model);
    const onItsWay = this.reading.get(id);
    if (onItsWay) return onItsWay;
    const read = this.readNow(ref).finally(() => {
      if (this.reading.get(id) === read) this.reading.delete(id);
    });
    this.reading.set(id, read);
    return read;
  }

  /** Run `write` (a change to `ref`'s state) so that no read asked for after it ends shares a read sent before. */
  private async writing<T>(ref: ModelRef, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } finally {
      this.reading.delete(this.keys.modelIndexMember(ref.endpoint, ref.model));
    }
  }

  private async readNow(ref: ModelRef): Promise<ModelState> {
    const [window, breaker] = await this.redis.mget(
      this.keys.modelWindow(ref.endpoint, ref.model),
      this.keys.modelBreaker(ref.endpoint, ref.model),
    );
    return { ...(window ? { window: parse<LearnedWindow>(window) } : {}), ...(breaker ? { breaker: parse<BreakerRecord>(breaker) } : {}) };
  }

  async list(): Promise<Array<ModelRef & ModelState>> {
    const members = (await this.redis.smembers(this.keys.modelIndex)).sort();
    if (members.length === 0) return [];
    const refs = members.map((m) => this.keys.parseModelIndexMember(m));
    const values = await this.redis.mget(
      ...refs.flatMap((r) => [this.keys.modelWindow(r.endpoint, r.model), this.keys.modelBreaker(r.endpoint, r.model)]),
    );
    return refs.flatMap((ref, i) => {
      const window = values[2 * i];
      const breaker = values[2 * i + 1];
      if (!window && !breaker) return [];
      return [
        {
          ...ref,
          ...(window ? { window: parse<LearnedWindow>(window) } : {}),
          ...(breaker ? { breaker: parse<BreakerRecord>(breaker) } : {}),
        },
      ];
    });
  }

  async learnWindow(ref: ModelRef, proposal: LearnedWindow): Promise<LearnedWindow> {
    const key = this.keys.modelWindow(ref.endpoint, ref.model);
    return await this.writing(ref, () =>
      retryOnConflict(
        async () => {
          const raw = await this.redis.get(key);
          const current = raw ? parse<LearnedWindow>(raw) : undefined;
          const merged = mergeLearned(current, proposal);
          if (merged === current) return merged;
          const stored = await putVersioned(
            this.redis,
            this.target(ref, key, 'learned window'),
            merged,
            current ? current.version : 'absent',
          );
          return stored ?? CONFLICT;
        },
        () => new StoreUnavailableError(`The learned window of ${ref.model} at ${ref.endpoint} kept changing under concurrent writes.`),
      ),
    );
  }

  async updateBreaker<T>(ref: ModelRef, change: (current: BreakerRecord | undefined) => { next?: BreakerRecord; result: T }): Promise<T> {
    const key = this.keys.modelBreaker(ref.endpoint, ref.model);
    return await this.writing(ref, () =>
      retryOnConflict(
        async () => {
          const raw = await this.redis.get(key);
          const current = raw ? parse<BreakerRecord>(raw) : undefined;
          const { next, result } = change(current);
          if (!next) return result;
          const stored = await putVersioned(
            this.redis,
            this.target(ref, key, 'circuit breaker'),
            next,
            current ? current.version : 'absent',
          );
          return stored ? result : CONFLICT;
        },
        () => new StoreUnavailableError(`The circuit breaker of ${ref.model} at ${ref.endpoint} kept changing under concurrent writes.`),
      ),
    );
  }

  async forget(ref: ModelRef): Promise<boolean> {
    return await this.writing(ref, async () => {
      const removed = await this.redis.del(this.keys.modelWindow(ref.endpoint, ref.model), this.keys.modelBreaker(ref.endpoint, ref.model));
      await this.redis.srem(this.keys.modelIndex, this.keys.modelIndexMember(ref.endpoint, ref.model));
      return removed > 0;
    });
  }

  private target(ref: ModelRef, key: string, what: string) {
    return { key, indexKey: this.keys.modelIndex, member: this.keys.modelIndexMember(ref.endpoint, ref.model), what };
  }
}

/** The state in this process's memory: learned windows and breakers of one runner only. */
export class MemoryModelState implements ModelStateStore {
  private readonly states = new Map<string, ModelRef & ModelState>();

  read(ref: ModelRef): Promise<ModelState> {
    const s = this.states.get(id(ref));
    return Promise.resolve({ ...(s?.window ? { window: s.window } : {}), ...(s?.breaker ? { breaker: s.breaker } : {}) });
  }

  list(): Promise<Array<ModelRef & ModelState>> {
    return Promise.resolve([...this.states.values()].map((s) => ({ ...s })));
  }

  learnWindow(ref: ModelRef, proposal: LearnedWindow): Promise<LearnedWindow> {
    const s = this.entry(ref);
    const merged = mergeLearned(s.window, proposal);
    if (merged !== s.window) s.window = { ...merged, version: merged.version + 1 };
    return Promise.resolve(s.window ?? merged);
  }

  updateBreaker<T>(ref: ModelRef, change: (current: BreakerRecord | undefined) => { next?: BreakerRecord; result: T }): Promise<T> {
    const s = this.entry(ref);
    const { next, result } = change(s.breaker);
    if (next) s.breaker = { ...next, version: (s.breaker?.version ?? 0) + 1 };
    return Promise.resolve(result);
  }

  forget(ref: ModelRef): Promise<boolean> {
    return Promise.resolve(this.states.delete(id(ref)));
  }

  private entry(ref: ModelRef): ModelRef & ModelState {
    let s = this.states.get(id(ref));
    if (!s) this.states.set(id(ref), (s = { endpoint: ref.endpoint, model: ref.model }));
    return s;
  }
}

const id = (ref: ModelRef) => JSON.stringify([ref.endpoint, ref.model]);

function parse<T>(raw: string): T {
  return JSON.parse(raw) as T;
}
