/**
 * An MCP server written for the tests with the official SDK, speaking stdio:
 * `next_count` returns a counter that goes up by one per call (so two ticks
 * see two different values); `echo_env` returns the value of an environment
 * variable (to show a server never receives the worker's secrets).
 * Run: `node --import tsx test/support/mcp-counter-server.ts`, or bundled (test/support/test-programs.ts).
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

let count = 0;
const server = new McpServer({ name: 'counter', version: '1.0.0' });
server.registerTool('next_count', { description: 'The next value of a counter that goes up by one per call.' }, async () => ({
  content: [{ type: 'text', text: `count=${++count}` }],
}));
server.registerTool(
  'echo_env',
  { description: 'The value of an environment variable of this server.', inputSchema: { name: z.string() } },
  async ({ name }) => ({ content: [{ type: 'text', text: `${name}=${process.env[name] ?? '(unset)'}` }] }),
);
await server.connect(new StdioServerTransport());
