/**
 * `/mcp`: this product's MCP server (`mcp-server.ts`) over Streamable HTTP, mounted by
 * `http/server.ts` behind the bearer key, the browser guard, the 503 gate and the JSON body
 * parser, like `/api`. Stateless, as the SDK documents it: each `POST` gets a server and a
 * transport of its own, closed when the answer is sent, so any gateway of a fleet answers any
 * request and nothing is kept between them. `GET` (a server-sent stream) and `DELETE` (ending a
 * session) have no meaning without sessions: 405. The SDK's server modules load with the first
 * request, so a gateway nobody asks over MCP never loads them.
 */
import { Router } from 'express';
import type { McpDeps } from './mcp-deps.ts';

/** The server and transport modules, loaded once on first use. */
let modules: Promise<[typeof import('./mcp-server.ts'), typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js')]> | undefined;

/** The `/mcp` router over `deps`. */
export function mcpRouter(deps: McpDeps, info: { version: string }): Router {
  const router = Router();
  router.post('/', async (req, res) => {
    modules ??= Promise.all([import('./mcp-server.ts'), import('@modelcontextprotocol/sdk/server/streamableHttp.js')]);
    const [{ createMcpServer }, { StreamableHTTPServerTransport }] = await modules;
    const server = createMcpServer(deps, info);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  router.all('/', (_req, res) => {
    res
      .status(405)
      .set('Allow', 'POST')
      .json({
        jsonrpc: '2.0',
        error: { code: -32000, message: 'Method not allowed: this MCP endpoint is stateless; use POST.' },
        id: null,
      });
  });
  return router;
}
