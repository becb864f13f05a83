/** A gateway whose `/api/cron` runs on the real cron service (cli/gateway-cron-api.ts), for tests of the HTTP surface. */
import { openCronApi } from '../../cli/gateway-cron-api.ts';
import type { CronApi } from '../../gateway/http/cron-routes.ts';
import { startGateway, type Gateway } from '../../gateway/gateway-process.ts';
import { createLogger } from '../../scheduler/logger.ts';
import type { CleanUp } from './cleanup.ts';
import type { TestEnv } from './env.ts';

/** One JSON request with the API key: its status and parsed body. */
export type ApiCall = (method: string, path: string, body?: unknown) => Promise<{ status: number; body: Record<string, any> }>;

/**
 * Start a gateway on `env` (whose configuration sets `api_server.port` 0 and `api_server.key` `key`) with the
 * cron API wired in; both are stopped through `cleanups`.
 */
export async function startCronApiGateway(
  cleanups: CleanUp[],
  env: TestEnv,
  key: string,
): Promise<{ gw: Gateway; cron: CronApi; call: ApiCall }> {
  const log = createLogger({ level: 'silent' });
  const cron = await openCronApi(env.config, env.redisUrl, log);
  cleanups.push(() => cron.close());
  const gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log, cron: cron.api });
  cleanups.push(() => gw.close());
  const call: ApiCall = async (method, path, body) => {
    const res = await fetch(`${gw.httpAddress.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).catch((err: Error & { cause?: { code?: string; message?: string } }) => {
      // fetch says only "fetch failed": name the cause (a refused or reset connection, a connect time-out).
      throw new Error(`${method} ${path}: ${err.message} (${err.cause?.code ?? err.cause?.message ?? 'no cause'})`, { cause: err });
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  return { gw, cron: cron.api, call };
}
