/**
 * `hermes mcp`: this product as an MCP server over stdio (gateway/mcp/mcp-server.ts; docs/MCP.md),
 * for `claude mcp add hermes -- hermes mcp`, Cursor and Codex. It connects to Redis like every
 * command (REDIS_URL, else the running embedded server; it never starts one), speaks MCP on
 * stdin/stdout and logs on stderr only, and ends when its client closes stdin or on SIGTERM/SIGINT.
 * The SDK and the server's modules load only here, so no other command's start-up grows.
 */
import type { HermesConfig } from '../../scheduler/config/config.ts';
import { createLogger } from '../../scheduler/logger.ts';
import type { CliConnection } from '../cli-context.ts';
import { cliLogLevel } from '../run-command.ts';

/**
 * Serve MCP on stdio over `conn` until the client goes away.
 * Resolves when stdin has ended (or a stop signal came) and the server is closed; the caller closes `conn`.
 */
export async function runMcpServer(config: HermesConfig, conn: CliConnection, version: string): Promise<void> {
  const [{ createMcpServer }, { mcpDepsFor }, { StdioServerTransport }] = await Promise.all([
    import('../../gateway/mcp/mcp-server.ts'),
    import('../../gateway/mcp/mcp-deps.ts'),
    import('@modelcontextprotocol/sdk/server/stdio.js'),
  ]);
  const log = createLogger({ level: cliLogLevel(config), name: 'mcp' });
  const server = createMcpServer(mcpDepsFor(config, conn, log), { version });
  const transport = new StdioServerTransport();
  const ended = new Promise<void>((resolve) => {
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
    transport.onclose = resolve;
  });
  await server.connect(transport);
  await ended;
  await server.close();
}
