/**
 * `POST /hooks/ci` signed as GitHub signs starts a turn in its session, and `hermes status` — the CLI
 * as a process, on the same `config.yaml` — shows the hook, its last delivery and that the turn in its
 * session replied (`--json` too); a hook that took nothing yet shows `never`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe } from 'vitest';
import { startGateway } from '../gateway/gateway-process.ts';
import { githubSignature } from '../gateway/hooks/hook-signature.ts';
import { loadConfig } from '../scheduler/config/config.ts';
import { createLogger } from '../scheduler/logger.ts';
import { it } from './support/cleanup.ts';
import { startFakeOpenAI } from './support/fake-openai.ts';
import { runHermes, startWorkerStack, waitForEvents } from './support/stack.ts';

const SECRET = 'github-status-secret-0123456789';

const CONFIG_YAML = `hooks:
  ci:
    session: ops
    signature: github
    secret: ${SECRET}
    events: [workflow_run]
    template: "CI {{workflow_run.name}} finished: {{workflow_run.conclusion}}. Tell me in one line."
  deploy:
    session: ops
    action: wake_loop
    secret: ${SECRET}
`;

describe.concurrent('hermes status and signed webhooks', () => {
  it('a GitHub-signed POST /hooks/ci starts a turn in ops; hermes status shows the delivery and that the turn replied', async ({
    cleanups,
    expect,
  }) => {
    const model = await startFakeOpenAI();
    model.respond(() => 'CI is green.');
    cleanups.push(() => model.close());
    const { env, c } = await startWorkerStack(cleanups, {
      'agent.base_url': model.baseUrl,
      'agent.api_key': 'k',
      'api_server.port': 0,
      'api_server.key': 'status-hook-key-0123456789',
    });
    // The hooks live in the home's config.yaml, read by the gateway here and by the CLI process alike.
    writeFileSync(join(env.home, 'config.yaml'), CONFIG_YAML, { mode: 0o600 });
    const hooks = loadConfig({ env: { HERMES_HOME: env.home } }).hooks;
    const gw = await startGateway({ config: { ...env.config, hooks }, redisUrl: env.redisUrl, log: createLogger({ level: 'silent' }) });
    cleanups.push(() => gw.close());

    const before = await runHermes(env, ['status']);
    expect(before.code, before.stderr).toBe(0);
    expect(before.stdout).toMatch(/^ci\s+turn\s+ops\s+never\s+—\s+—\s*$/m);

    const body = JSON.stringify({ action: 'completed', workflow_run: { name: 'CI', conclusion: 'success' } });
    const delivery = crypto.randomUUID();
    const res = await fetch(`${gw.httpAddress.url}/hooks/ci`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'workflow_run',
        'x-github-delivery': delivery,
        'x-hub-signature-256': githubSignature(SECRET, body),
      },
      body,
    });
    const accepted = (await res.json()) as Record<string, string>;
    expect(res.status, JSON.stringify(accepted)).toBe(202);
    await waitForEvents(c, 'ops', 'reply', 1, 20_000);

    const after = await runHermes(env, ['status']);
    expect(after.code, after.stderr).toBe(0);
    expect(after.stdout).toMatch(/^hooks$/m);
    expect(after.stdout).toMatch(/^HOOK\s+ACTION\s+TARGET\s+LAST DELIVERY\s+EVENT\s+STARTED\s*$/m);
    expect(after.stdout).toMatch(/^ci\s+turn\s+ops\s+\d+s ago\s+workflow_run\s+turn replied \d+s ago\s*$/m);
    expect(after.stdout).toMatch(/^deploy\s+wake_loop\s+ops\s+never\s+—\s+—\s*$/m);

    const json = await runHermes(env, ['status', '--json']);
    expect(json.code, json.stderr).toBe(0);
    const view = JSON.parse(json.stdout) as { hooks: unknown[] };
    expect(view.hooks).toEqual([
      {
        name: 'ci',
        action: 'turn',
        target: 'ops',
        last_delivery: {
          at: expect.any(Number),
          delivery_id: delivery,
          event: 'workflow_run',
          accepted: {
            status: 'accepted',
            hook: 'ci',
            action: 'turn',
            session: 'ops',
            message_id: accepted.message_id,
            occurrence_id: accepted.occurrence_id,
          },
          turn: { state: 'replied', answered_at: expect.any(Number) },
        },
      },
      { name: 'deploy', action: 'wake_loop', target: 'ops', last_delivery: null },
    ]);
  });
});
