import type { IncomingHttpHeaders } from 'node:http';
import type { AdapterFactory } from '../protocol.js';
import { AnthropicMessages } from './anthropic/protocol.js';
import { HttpToolAdapter } from './http-tool/protocol.js';
import { McpAdapter } from './mcp/protocol.js';
import { ChatCompletions } from './openai-chat/protocol.js';
import { ResponsesApi } from './openai-responses/protocol.js';

/**
 * How one route kind is served and built: the one place the route table (routes.ts), the settings
 * (GOV_UPSTREAM_<KIND> and its documentation) and the listener (the format of an answer to an unknown
 * path) learn which protocols this build governs. Each protocol lives in its own folder beside this file.
 */
export interface ProtocolRegistration {
  /** Route kind (`openai`, `mcp`...): the routes-file `kind`, and the path segment of a fixed route. */
  readonly kind: string;
  /**
   * A fixed route, served at `/{kind}/*` and forwarded to the URL in setting `env` (`url` when unset);
   * or named routes, served at `/{segment}/{name}/*`, one per upstream of the routes file's `section`.
   */
  readonly route: { readonly env: string; readonly url: string } | { readonly segment: string; readonly section: 'mcp' | 'tools' };
  /** A call to an unknown path that these headers mark as this protocol's is answered in its format. */
  readonly claims?: (headers: IncomingHttpHeaders) => boolean;
  /** The protocols of one route of the kind, tried in order by classify(); the first also answers the route's errors. */
  readonly create: AdapterFactory;
}

/**
 * Every protocol of this build, one line each. The first fixed route answers, in its format, a call no
 * route or header claims. A route kind missing here refuses to start (routes.ts), so a protocol is never
 * proxied without an adapter that can govern it.
 */
export const PROTOCOLS: readonly ProtocolRegistration[] = [
  { kind: 'openai', route: { env: 'GOV_UPSTREAM_OPENAI', url: 'https://api.openai.com' }, create: () => [new ChatCompletions(), new ResponsesApi()] },
  { kind: 'anthropic', route: { env: 'GOV_UPSTREAM_ANTHROPIC', url: 'https://api.anthropic.com' }, claims: (h) => h['anthropic-version'] !== undefined, create: () => [new AnthropicMessages()] },
  { kind: 'mcp', route: { segment: 'mcp', section: 'mcp' }, create: (route, context) => [new McpAdapter(route.name, context)] },
  { kind: 'tool', route: { segment: 'tools', section: 'tools' }, create: (route, context) => [new HttpToolAdapter(route.name, context)] },
];

/** The fixed-route registrations (an LLM provider at `/{kind}`), in registry order. */
export function fixedRoutes(): Array<{ kind: string; env: string; url: string }> {
  const out: Array<{ kind: string; env: string; url: string }> = [];
  for (const p of PROTOCOLS) if ('env' in p.route) out.push({ kind: p.kind, env: p.route.env, url: p.route.url });
  return out;
}

/** Where a route of a kind is served: `/{kind}` for a fixed route, `/{segment}/{name}` for a named one. */
export function routePrefix(kind: string, name: string): string {
  const p = PROTOCOLS.find((r) => r.kind === kind);
  return p !== undefined && 'segment' in p.route ? `/${p.route.segment}/${name}` : `/${kind}`;
}

/** Route kind → adapter factory. */
export const ADAPTERS: Readonly<Record<string, AdapterFactory>> = Object.fromEntries(PROTOCOLS.map((p) => [p.kind, p.create]));
