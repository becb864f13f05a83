/**
 * MCP servers (`mcp_servers.<name>`) as tool sources, through the official
 * `@modelcontextprotocol/sdk` client: a child process speaking stdio
 * (`command`, `args`, `env`) or a Streamable HTTP endpoint (`url`, `headers`).
 *
 * Policy:
 * - every server is connected and its tools listed once at worker start, and
 *   again when it reconnects; a tool is offered as `<server>__<tool>`;
 * - a server that fails to start (or to list its tools) is logged and
 *   skipped — the others still serve — and retried with backoff
 *   (`MCP_RECONNECT_SECONDS`), as is one whose connection closes;
 * - a stdio server gets the command environment (`../command-env.ts`) plus
 *   its own `env`, never the worker's secrets;
 * - a call carries the turn's AbortSignal (the server is told to cancel)
 *   and the toolbox's timeout.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Logger } from 'pino';
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { ToolError } from '../../scheduler/errors/tool-error.ts';
import type { AgentTool } from './tool.ts';
import type { ToolSource } from './toolbox.ts';

/** Backoff steps between reconnects of a failed or closed server, seconds; the last repeats. */
export const MCP_RECONNECT_SECONDS = [1, 5, 15, 60];

/** How long connecting and listing a server's tools may take, ms. */
export const MCP_CONNECT_TIMEOUT_MS = 15_000;

type ServerSpec = HermesConfig['mcp_servers'][string];

/** The tool name the model sees: `<server>__<tool>`, cut to the 64 characters function names allow. */
export function mcpToolName(server: string, tool: string): string {
  return `${server}__${tool.replace(/[^a-zA-Z0-9_-]/g, '_')}`.slice(0, 64);
}

interface Connected {
  client: Client;
  tools: AgentTool[];
}

/** The configured MCP servers of one worker process. */
export class McpServers implements ToolSource {
  private readonly connected = new Map<string, Connected>();
  private readonly retries = new Map<string, { attempt: number; timer?: NodeJS.Timeout }>();
  private closing = false;

  /** @param processEnv - builds a stdio server's environment from its declared `env` (`Toolbox.processEnv`) */
  constructor(
    private readonly specs: Record<string, ServerSpec>,
    private readonly log: Logger,
    private readonly processEnv: (set: Record<string, string>) => Record<string, string>,
  ) {}

  /** Connect every server; resolves when each is connected or has failed (and is logged). */
  async start(): Promise<void> {
    await Promise.all(Object.keys(this.specs).map((name) => this.connect(name)));
  }

  /** The tools of the servers connected now. */
  tools(): AgentTool[] {
    return [...this.connected.values()].flatMap((c) => c.tools);
  }

  /** Names of the servers connected now. */
  get connectedServers(): string[] {
    return [...this.connected.keys()];
  }

  /** Close every connection (stdio servers are stopped); no reconnects after this. */
  async close(): Promise<void> {
    this.closing = true;
    for (const r of this.retries.values()) clearTimeout(r.timer);
    const clients = [...this.connected.values()].map((c) => c.client);
    this.connected.clear();
    await Promise.allSettled(clients.map((c) => c.close()));
  }

  private async connect(name: string): Promise<void> {
    const spec = this.specs[name]!;
    const client = new Client({ name: 'hermes-worker', version: '1' });
    let stderrTail = '';
    let transport: Transport;
    if ('url' in spec) {
      transport = new StreamableHTTPClientTransport(new URL(spec.url), { requestInit: { headers: spec.headers } });
    } else {
      const stdio = new StdioClientTransport({
        command: spec.command,
        args: spec.args,
        env: this.processEnv(spec.env),
        cwd: spec.cwd,
        stderr: 'pipe',
      });
      stdio.stderr?.on('data', (d: Buffer) => (stderrTail = (stderrTail + d.toString('utf8')).slice(-500)));
      transport = stdio;
    }
    try {
      await client.connect(transport, { timeout: MCP_CONNECT_TIMEOUT_MS });
      const listed = await client.listTools(undefined, { timeout: MCP_CONNECT_TIMEOUT_MS });
      const tools = listed.tools.map((t): AgentTool => ({
        name: mcpToolName(name, t.name),
        description: t.description ?? `${t.name} (MCP server ${name})`,
        parameters: t.inputSchema,
        groups: [mcpToolName(name, t.name), name, 'mcp'],
        call: (args, ctx) => callTool(client, name, t.name, args, ctx.signal),
      }));
      if (this.closing) {
        await client.close();
        return;
      }
      this.connected.set(name, { client, tools });
      this.retries.delete(name);
      client.onclose = () => {
        if (this.connected.get(name)?.client !== client) return;
        this.connected.delete(name);
        this.log.warn({ mcpServer: name }, 'MCP server connection closed; its tools are withdrawn until it reconnects');
        this.scheduleReconnect(name);
      };
      this.log.info({ mcpServer: name, tools: tools.length }, 'MCP server connected');
    } catch (err) {
      await client.close().catch(() => {});
      this.log.warn(
        { mcpServer: name, err: (err as Error).message, stderr: stderrTail.trim() || undefined },
        'MCP server failed to start; skipped (the other tools still serve)',
      );
      this.scheduleReconnect(name);
    }
  }

  private scheduleReconnect(name: string): void {
    if (this.closing) return;
    const r = this.retries.get(name) ?? { attempt: 0 };
    const seconds = MCP_RECONNECT_SECONDS[Math.min(r.attempt, MCP_RECONNECT_SECONDS.length - 1)]!;
    r.attempt += 1;
    r.timer = setTimeout(() => void this.connect(name), seconds * 1000);
    r.timer.unref();
    this.retries.set(name, r);
  }
}

/** Call one MCP tool; its text content is the result. @throws ToolError `failed` when the server reports an error */
async function callTool(client: Client, server: string, tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<string> {
  const res = await client.callTool({ name: tool, arguments: args }, undefined, { signal, timeout: 24 * 3600 * 1000 });
  const parts = Array.isArray(res.content) ? (res.content as Array<{ type: string; text?: string }>) : [];
  const text = parts.map((p) => (p.type === 'text' ? (p.text ?? '') : `[${p.type} content]`)).join('\n');
  const structured = parts.length === 0 && 'structuredContent' in res && res.structuredContent ? JSON.stringify(res.structuredContent) : '';
  if (res.isError)
    throw new ToolError(text || `${server}__${tool} reported an error.`, { kind: 'failed', tool: mcpToolName(server, tool) });
  return text || structured;
}
