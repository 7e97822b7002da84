import type { AdapterFactory } from './adapter.js';
import { AnthropicAdapter } from './anthropic.js';
import { HttpToolAdapter } from './http-tool-adapter.js';
import { McpAdapter } from './mcp/adapter.js';
import { OpenAiAdapter } from './openai.js';

/**
 * Route kind → adapter. One line per upstream protocol; the routes of a kind missing here refuse to
 * start (routes.ts), so a protocol is never proxied without an adapter that can govern it.
 */
export const ADAPTERS: Readonly<Record<string, AdapterFactory>> = {
  openai: () => new OpenAiAdapter(),
  anthropic: () => new AnthropicAdapter(),
  mcp: (route, context) => new McpAdapter(route.name, context),
  tool: (route, context) => new HttpToolAdapter(route.name, context),
};
