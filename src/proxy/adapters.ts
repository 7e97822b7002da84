import { AnthropicAdapter } from './anthropic.js';
import { OpenAiAdapter } from './openai.js';
import type { AdapterFactory } from './routes.js';

/**
 * Route kind → adapter. One line per upstream protocol; the routes of a kind missing here refuse to
 * start (routes.ts), so a protocol is never proxied without an adapter that can govern it.
 */
export const ADAPTERS: Readonly<Record<string, AdapterFactory>> = {
  openai: () => new OpenAiAdapter(),
  anthropic: () => new AnthropicAdapter(),
};
