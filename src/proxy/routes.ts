import { SettingsError, type ProxySettings } from '../config/settings.js';
import type { AdapterContext, AdapterFactory, Protocol } from './protocol.js';
import { PROTOCOLS, routePrefix } from './protocols/registry.js';
import { parseTarget, type UpstreamTarget } from './upstream.js';

export interface ProxyRoute {
  kind: string;
  name: string;
  /** Path prefix on the proxy, e.g. `/openai` or `/mcp/github`. */
  prefix: string;
  target: UpstreamTarget;
  /** Upstream timeout of this route (a named route may set its own). */
  timeoutMs: number;
  /** The protocols served here, tried in order by classify() (OpenAI: Chat Completions, then the Responses API). */
  protocols: readonly Protocol[];
  /** The first of them: it answers, in its format, what no protocol of the route takes. */
  adapter: Protocol;
  /** An LLM provider's route (a fixed route of the registry): its calls spend the agent's token budget. */
  llm: boolean;
}

export interface RouteMatch {
  route: ProxyRoute;
  /** The request path below the prefix, query included; at least `/`. */
  rest: string;
  /** `rest` without its query; always in normal form (see pathNotNormal). */
  restPathname: string;
  /** Path and query to request from the upstream: the route URL's own path joined with `rest`. */
  upstreamPath: string;
}

/**
 * A request under a route whose path is not in normal form: it is refused with a 400 in the route's
 * format and never forwarded. It carries no path to forward, so a caller cannot mistake it for a match.
 */
export interface RouteRefusal {
  route: ProxyRoute;
  /** Why the path was refused, for the caller's error message. */
  refused: string;
}

/**
 * Why a path (no query) is not in normal form, or null when it is. Adapters decide from the path as
 * written whether a request is governed, passed or refused, while an upstream (or anything between) may
 * resolve it to another resource: `/v1//responses/x`, `/v1/a/../responses/x`, `/v1/%72esponses/x` and
 * `/v1/responses%2Fx` can all reach `/v1/responses/x`. So a path with an empty segment, a `.` or `..`
 * segment, a backslash, a `#`, a malformed escape, or an escape of a character that needs none (the
 * unreserved ALPHA / DIGIT / `-` `.` `_` `~`) or that would be read as a separator (`%2F`, `%5C`) is
 * refused instead of forwarded. A trailing `/` is not an empty segment. Case is left to the adapters.
 */
export function pathNotNormal(pathname: string): string | null {
  if (pathname.includes('//')) return 'an empty path segment (//)';
  if (pathname.includes('\\')) return 'a backslash';
  if (pathname.includes('#')) return 'a # (a fragment is not part of a request)';
  if (pathname.includes('/.')) {
    // `..;x` too: some servers drop a segment's `;` parameters before resolving it.
    for (const seg of pathname.split('/')) {
      const name = seg.split(';', 1)[0];
      if (name === '.' || name === '..') return `a ${name} segment`;
    }
  }
  if (pathname.includes('%')) {
    const escapes = pathname.match(/%(?:[0-9A-Fa-f]{2})?/g) ?? [];
    for (const e of escapes) {
      if (e.length !== 3) return 'a % that is not a percent-escape';
      if (UNENCODED.test(String.fromCharCode(parseInt(e.slice(1), 16)))) return `a percent-escape that must not be encoded (${e})`;
    }
  }
  return null;
}

/** Unreserved characters (RFC 3986 2.3), plus the path separators an upstream might decode. */
const UNENCODED = /^[A-Za-z0-9\-._~/\\]$/;

export class RouteTable {
  private readonly byPrefix = new Map<string, ProxyRoute>();

  constructor(readonly routes: readonly ProxyRoute[]) {
    for (const r of routes) this.byPrefix.set(r.prefix, r);
  }

  /**
   * `/openai/v1/x?y` → the openai route and `/v1/x?y`; `/mcp/github/...` → the github MCP route. A path
   * under a route that is not in normal form is a RouteRefusal; no route at all is null.
   */
  match(path: string): RouteMatch | RouteRefusal | null {
    const q = path.indexOf('?');
    const pathname = q === -1 ? path : path.slice(0, q);
    const s1 = pathname.indexOf('/', 1);
    const first = s1 === -1 ? pathname : pathname.slice(0, s1);
    let route = this.byPrefix.get(first);
    if (route === undefined && s1 !== -1) {
      const s2 = pathname.indexOf('/', s1 + 1);
      // Named routes are case-insensitive (routes-file.ts stores them lower-cased).
      route = this.byPrefix.get((s2 === -1 ? pathname : pathname.slice(0, s2)).toLowerCase());
    }
    if (route === undefined) return null;
    const restPathname = pathname.slice(route.prefix.length) || '/';
    const notNormal = pathNotNormal(restPathname);
    if (notNormal !== null) return { route, refused: `the request path contains ${notNormal}; send it in normal form` };
    const query = q === -1 ? '' : path.slice(q);
    const base = route.target.basePath;
    // `/mcp/orders` reaches the route URL exactly as written (some servers answer `/mcp/` but redirect
    // `/mcp`); anything below it is appended to the URL's path.
    const upstreamPath = pathname.length === route.prefix.length ? (base || '/') + query : base.replace(/\/+$/, '') + restPathname + query;
    return { route, rest: restPathname + query, restPathname, upstreamPath };
  }
}

interface Upstream {
  kind: string;
  name: string;
  url: string;
  timeoutMs: number | null;
  llm: boolean;
}

/**
 * The route table of a sidecar: the fixed routes of the registry (the LLM providers) and the named
 * upstreams of its named kinds (routes-file.ts: the GOV_PROXY_ROUTES file, then
 * GOV_UPSTREAM_MCP_<NAME>/GOV_UPSTREAM_TOOL_<NAME>). A kind without an adapter stops the start: its
 * traffic would otherwise pass ungoverned.
 */
export function buildRouteTable(proxy: ProxySettings, adapters: Readonly<Record<string, AdapterFactory>>, context: AdapterContext): RouteTable {
  const all: Upstream[] = [];
  for (const p of PROTOCOLS) if ('env' in p.route) all.push({ kind: p.kind, name: p.kind, url: proxy.upstreams[p.kind], timeoutMs: null, llm: true });
  for (const p of PROTOCOLS) {
    if ('section' in p.route) for (const u of proxy.namedRoutes[p.route.section].values()) all.push({ kind: p.kind, name: u.name, url: u.url, timeoutMs: u.timeoutMs, llm: false });
  }
  const routes: ProxyRoute[] = [];
  for (const u of all) {
    const factory = adapters[u.kind];
    if (factory === undefined) throw new SettingsError(`route ${routePrefix(u.kind, u.name)}: no ${u.kind} adapter in this build, refusing to forward its traffic ungoverned`);
    const protocols = factory({ kind: u.kind, name: u.name }, context);
    routes.push({
      kind: u.kind,
      name: u.name,
      prefix: routePrefix(u.kind, u.name),
      target: parseTarget(u.url),
      timeoutMs: u.timeoutMs ?? proxy.upstreamTimeoutMs,
      protocols,
      adapter: protocols[0],
      llm: u.llm,
    });
  }
  return new RouteTable(routes);
}
