/**
 * An MCP server written for the tests with the official SDK, over Streamable
 * HTTP (stateless: a server and transport per request, as the SDK documents).
 * Its `next_ticket` tool returns a counter that goes up per call. Requests
 * without the expected `Authorization` header are answered 401, so a test can
 * see that the configured `headers` are sent.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { asyncListener } from './http.ts';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

export interface McpHttpServer {
  /** `http://127.0.0.1:<port>/mcp` */
  url: string;
  /** Requests refused for a missing or wrong Authorization header. */
  unauthorized: number;
  close(): Promise<void>;
}

export async function startMcpHttpServer(options: { token: string }): Promise<McpHttpServer> {
  let tickets = 0;
  const state = { unauthorized: 0 };
  const server: Server = createServer(
    asyncListener(async (req, res) => {
      if (req.headers.authorization !== `Bearer ${options.token}`) {
        state.unauthorized++;
        res.writeHead(401).end();
        return;
      }
      const mcp = new McpServer({ name: 'tickets', version: '1.0.0' });
      mcp.registerTool('next_ticket', { description: 'The next ticket number.' }, async () => ({
        content: [{ type: 'text', text: `ticket #${++tickets}` }],
      }));
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on('close', () => {
        void transport.close();
        void mcp.close();
      });
      await mcp.connect(transport);
      await transport.handleRequest(req, res);
    }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    get unauthorized() {
      return state.unauthorized;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
