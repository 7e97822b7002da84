import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

/**
 * Named upstreams of the sidecar: `/mcp/{name}/*` and `/tools/{name}/*`. Format in docs/proxy-routes.md.
 * Sources, later winning: the routes file (`GOV_PROXY_ROUTES`), then `GOV_UPSTREAM_MCP_<NAME>` and
 * `GOV_UPSTREAM_TOOL_<NAME>`, since an environment variable is the per-deployment override. An environment
 * URL keeps the file's timeout for the same name.
 */

export interface NamedUpstream {
  /** Lower-case; routes match names case-insensitively. */
  name: string;
  /** Absolute http(s) URL without query, fragment or credentials. */
  url: string;
  /** Per-upstream timeout; null: the sidecar's default applies. */
  timeoutMs: number | null;
}

export interface ProxyRoutes {
  mcp: Map<string, NamedUpstream>;
  tools: Map<string, NamedUpstream>;
}

export class ProxyRoutesError extends Error {
  override name = 'ProxyRoutesError';
}

/** Route names are path segments and environment-variable suffixes: letters, digits, '_' and '-'. */
const NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

const UpstreamUrl = z.string().superRefine((s, ctx) => {
  const problem = urlProblem(s);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
});

const Entry = z.union([
  UpstreamUrl,
  z.strictObject({
    url: UpstreamUrl,
    timeout_ms: z.number().int().positive().max(3_600_000).optional(),
  }),
]);

const Section = z.record(z.string(), Entry).superRefine((rec, ctx) => {
  const seen = new Set<string>();
  for (const name of Object.keys(rec)) {
    const lower = name.toLowerCase();
    if (!NAME.test(lower)) ctx.addIssue({ code: 'custom', path: [name], message: `route name must match ${NAME.source} (case-insensitive)` });
    else if (seen.has(lower)) ctx.addIssue({ code: 'custom', path: [name], message: `route name "${lower}" is given twice (names are case-insensitive)` });
    seen.add(lower);
  }
});

export const ProxyRoutesFile = z.strictObject({
  mcp: Section.nullish(),
  tools: Section.nullish(),
});
export type ProxyRoutesFile = z.infer<typeof ProxyRoutesFile>;

/**
 * Credentials in a route URL would end up in logs and error messages; the caller's own Authorization
 * header passes through instead.
 */
function urlProblem(s: string): string | null {
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return `"${s}" is not an absolute URL`;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return `upstream URL must be http or https, not ${u.protocol}`;
  if (u.username !== '' || u.password !== '') return 'upstream URL must not carry credentials';
  if (u.search !== '' || u.hash !== '') return 'upstream URL must not carry a query or fragment';
  return null;
}

/** Kept as written (WHATWG-serialised): some servers answer `/mcp/` but redirect `/mcp`. */
function normalizeUrl(s: string): string {
  return new URL(s).href;
}

function sectionToMap(section: Record<string, z.infer<typeof Entry>> | null | undefined): Map<string, NamedUpstream> {
  const m = new Map<string, NamedUpstream>();
  for (const [rawName, entry] of Object.entries(section ?? {})) {
    const name = rawName.toLowerCase();
    if (typeof entry === 'string') m.set(name, { name, url: normalizeUrl(entry), timeoutMs: null });
    else m.set(name, { name, url: normalizeUrl(entry.url), timeoutMs: entry.timeout_ms ?? null });
  }
  return m;
}

/** Parses the routes file's text; `source` names it in errors. */
export function parseProxyRoutesFile(text: string, source = 'routes file'): ProxyRoutes {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    throw new ProxyRoutesError(`${source}: not valid YAML: ${(e as Error).message}`);
  }
  const parsed = ProxyRoutesFile.safeParse(doc ?? {});
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new ProxyRoutesError(`${source}: ${issues}`);
  }
  return { mcp: sectionToMap(parsed.data.mcp), tools: sectionToMap(parsed.data.tools) };
}

const ENV_ROUTE = /^GOV_UPSTREAM_(MCP|TOOL)_(.+)$/;

/**
 * The named upstreams in force: the routes file at `path` (default: `GOV_PROXY_ROUTES`; none when unset),
 * then each non-empty `GOV_UPSTREAM_MCP_<NAME>` / `GOV_UPSTREAM_TOOL_<NAME>`, `<NAME>` lower-cased.
 */
export function loadProxyRoutes(env: NodeJS.ProcessEnv = process.env, path: string | undefined = env.GOV_PROXY_ROUTES): ProxyRoutes {
  let routes: ProxyRoutes = { mcp: new Map(), tools: new Map() };
  if (path !== undefined && path !== '') {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (e) {
      throw new ProxyRoutesError(`GOV_PROXY_ROUTES: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    routes = parseProxyRoutesFile(text, path);
  }
  for (const key of Object.keys(env).sort()) {
    const m = ENV_ROUTE.exec(key);
    const value = env[key];
    if (m === null || value === undefined || value.trim() === '') continue;
    const name = m[2].toLowerCase();
    if (!NAME.test(name)) throw new ProxyRoutesError(`${key}: route name "${name}" must match ${NAME.source}`);
    const problem = urlProblem(value.trim());
    if (problem !== null) throw new ProxyRoutesError(`${key}: ${problem}`);
    const map = m[1] === 'MCP' ? routes.mcp : routes.tools;
    map.set(name, { name, url: normalizeUrl(value.trim()), timeoutMs: map.get(name)?.timeoutMs ?? null });
  }
  return routes;
}
