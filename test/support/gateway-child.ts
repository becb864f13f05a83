/**
 * A gateway process for tests that need a real crash (SIGKILL) or a real
 * SIGTERM: reads its configuration from the environment like `hermes gateway`,
 * prints `READY <url> <instanceId>` on stdout, drains on SIGTERM.
 */
import { loadConfig } from '../../scheduler/config/config.ts';
import { createLogger } from '../../scheduler/logger.ts';
import { startGateway } from '../../gateway/gateway-process.ts';
import { drainOnSignals } from '../../gateway/shutdown-signals.ts';

const config = loadConfig();
const log = createLogger({ level: config.log_level, name: 'gateway' });
const gateway = await startGateway({ config, redisUrl: config.redis.url!, log });
drainOnSignals(gateway, log);
process.stdout.write(`READY ${gateway.httpAddress.url} ${gateway.instanceId}\n`);
