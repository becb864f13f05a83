/**
 * `GET /api/models` (docs/GATEWAY.md): every model the agent may call, at its endpoint, with its
 * window and where it comes from (configured, known, learned from a refusal, default) and its
 * circuit breaker — the rows of `scheduler/models/model-catalog.ts`, as `hermes models --json`.
 */
import { Router } from 'express';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { modelCatalog, modelView } from '../../scheduler/models/model-catalog.ts';
import { modelStateFor } from '../../scheduler/services.ts';
import type { Keys } from '../../scheduler/store/keys.ts';
import type { RedisClient } from '../../scheduler/store/redis/connection-factory.ts';

/** The `/api/models` router. */
export function modelRouter(deps: { config: HermesConfig; redis: RedisClient; keys: Keys }): Router {
  const router = Router();
  const store = modelStateFor(deps.redis, deps.keys);
  router.get('/', async (_req, res) => {
    const now = Date.now();
    res.json({ object: 'list', data: modelCatalog(deps.config, await store.list()).map((row) => modelView(row, now)) });
  });
  return router;
}
