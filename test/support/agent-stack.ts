/**
 * A worker running agent turns against the local model server (`fake-openai.ts`), with a folder the
 * file tools may read, for tests of what turns send and spend.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { WorkerProcess } from '../../worker/worker-process.ts';
import type { CleanUp } from './cleanup.ts';
import type { TestEnv } from './env.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fake-openai.ts';
import { startWorkerStack, type TestClients } from './stack.ts';

export interface AgentStack {
  env: TestEnv;
  c: TestClients;
  model: FakeOpenAI;
  dir: string;
  worker: WorkerProcess;
}

/**
 * Start the model server (counting usage), a test environment whose agent calls it, clients and an
 * in-process worker; all of it stopped through `cleanups`.
 * @param overrides - config overrides by dotted key (see `testEnv`)
 */
export async function startAgentStack(
  cleanups: CleanUp[],
  overrides: Record<string, unknown>,
  modelOptions: Parameters<typeof startFakeOpenAI>[0] = {},
): Promise<AgentStack> {
  const model = await startFakeOpenAI({ usage: 'counted', ...modelOptions });
  const dir = mkdtempSync(join(tmpdir(), 'hermes-agent-'));
  cleanups.push(
    () => model.close(),
    () => rmSync(dir, { recursive: true, force: true }),
  );
  const { env, c, worker } = await startWorkerStack(cleanups, {
    'agent.base_url': model.baseUrl,
    'agent.api_key': 'test',
    'agent.max_retries': 0,
    'tools.files.roots': [dir],
    ...overrides,
  });
  return { env, c, model, dir, worker };
}
