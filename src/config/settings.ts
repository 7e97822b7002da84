import { IngestSourcesSetting, type IngestSourceRules } from './ingest-sources.js';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { AGENT_ID, parseAgentList } from './agent-identity.js';
import { HEAP_SETTING_DOCS } from './heap-limits.js';
import { DETECTOR_SETTING_DOCS, loadDetectorSettings, type DetectorSettings } from './detector-settings.js';
import { loadRedisSettings, REDIS_SETTING_DOCS, type RedisSettings } from './redis-settings.js';
import { loadQueueSettings, QUEUE_SETTING_DOCS, type QueueSettings } from './queue-settings.js';
import { loadProxyRoutes, ProxyRoutesError, type ProxyRoutes } from '../proxy/routes-file.js';
import { fixedRoutes } from '../proxy/protocols/registry.js';
import { SourceId } from '../contracts/audit.js';
import { defaultSourceId } from '../ledger/source-id.js';
import { SecretFileError, withSecretFiles, withSecretFileDocs } from './secret-files.js';

export type Mode = 'embedded' | 'gateway' | 'sidecar';

/** The package root, so shipped policies/ and manifests/ are found wherever `gov` is started from. */
export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

interface SettingDoc {
  name: string;
  modes: Mode[];
  default: string;
  help: string;
}

/** One table drives both parsing and `gov <mode> --help`, so the two cannot drift apart. */
export const SETTING_DOCS: SettingDoc[] = withSecretFileDocs([
  { name: 'GOV_ENV', modes: ['embedded', 'gateway', 'sidecar'], default: 'development', help: 'environment name; production disables /docs and /openapi.json and requires auth' },
  { name: 'GOV_HOST', modes: ['embedded', 'gateway', 'sidecar'], default: '127.0.0.1', help: 'address to bind (set 0.0.0.0 inside a container)' },
  { name: 'GOV_EMBED_PORT', modes: ['embedded', 'sidecar'], default: '8765', help: 'embedded gateway port' },
  { name: 'GOV_EMBED_DB', modes: ['embedded', 'sidecar'], default: '.gov/ledger', help: 'LMDB ledger directory; :memory: keeps nothing across runs' },
  { name: 'GOV_EMBED_TOKEN', modes: ['embedded', 'sidecar'], default: '(generated)', help: 'bearer token; if unset an unsigned JWT with tier team is generated: in development printed once on stdout, otherwise written to <GOV_EMBED_DB>.token (mode 0600) and never printed' },
  { name: 'GOV_PORT', modes: ['gateway'], default: '8000', help: 'gateway port' },
  { name: 'GOV_DB_PATH', modes: ['gateway'], default: '.gov/gateway', help: 'LMDB ledger directory of the gateway when GOV_DATABASE_URL is unset' },
  { name: 'GOV_DATABASE_URL', modes: ['gateway'], default: '', help: 'PostgreSQL connection string (postgres://user:password@host:5432/db): the central audit store and shared state of every replica, migrated at start; unset: the LMDB ledger of GOV_DB_PATH' },
  { name: 'AUTH_ENABLED', modes: ['gateway'], default: 'true unless GOV_ENV is development/dev/test', help: 'require X-Gov-Token' },
  { name: 'GOV_API_KEYS', modes: ['gateway'], default: '', help: 'API keys as key:tier,key:tier (tiers free|developer|team|enterprise)' },
  { name: 'GOV_JWT_SECRET', modes: ['gateway'], default: '', help: 'HS256 secret for X-Gov-Token JWTs carrying a tier claim (and an exp claim: tokens that never expire are refused)' },
  { name: 'GOV_JWT_AUDIENCE', modes: ['gateway'], default: '', help: 'when set, a JWT must carry this aud claim' },
  { name: 'GOV_JWT_ISSUER', modes: ['gateway'], default: '', help: 'when set, a JWT must carry this iss claim' },
  { name: 'GOV_MAX_BODY_BYTES', modes: ['embedded', 'gateway', 'sidecar'], default: '5242880', help: 'largest accepted request body (413 above)' },
  { name: 'GOV_KILL_SWITCH', modes: ['embedded', 'gateway', 'sidecar'], default: '0', help: '1 blocks every governed call before scoring' },
  { name: 'RATE_LIMIT_ENABLED', modes: ['embedded', 'gateway', 'sidecar'], default: 'true unless GOV_ENV is development/dev/test', help: 'sliding-window rate limits' },
  { name: 'GOV_RATE_LIMIT_FILE', modes: ['embedded', 'gateway', 'sidecar'], default: 'manifests/rate-limits.yaml', help: 'rate-limit overrides (default, window_seconds, agent_overrides) and LLM token budgets (token_budget), for the API and the sidecar alike' },
  { name: 'GOV_MIN_SDK_VERSION', modes: ['embedded', 'gateway', 'sidecar'], default: '', help: 'requests with a lower sdk_version get 426' },
  { name: 'GOV_LEDGER_ANCHOR_FILE', modes: ['embedded', 'gateway', 'sidecar'], default: '<ledger directory>.anchor.json', help: 'head anchor: the chain head (seq, hash) kept outside the ledger, which verify compares against; put it on another volume; "off" disables it' },
  { name: 'GOV_LEDGER_ANCHOR_KEY', modes: ['embedded', 'gateway', 'sidecar'], default: '', help: 'HMAC key (at least 32 bytes) signing the head anchor, so that it cannot be rewritten without the key' },
  { name: 'GOV_LEDGER_ANCHOR_INTERVAL_MS', modes: ['embedded', 'gateway', 'sidecar'], default: '1000', help: 'how often the head anchor is brought up to the committed head (and always on shutdown)' },
  { name: 'GOV_SOURCE_ID', modes: ['embedded', 'gateway', 'sidecar'], default: '<mode>@<hostname>', help: 'names this sidecar or replica in every audit row it writes (the row\'s hashed `source`); unique per writer, stable across restarts of the same one' },
  { name: 'GOV_LEDGER_DURABILITY', modes: ['embedded', 'gateway', 'sidecar'], default: 'disk (sidecar: process)', help: 'when a call is answered: process: its row is committed (survives a crash of the process); disk: flushed to the local disk (survives power loss); central (sidecar with GOV_CENTRAL_URL): as process, and a call a policy rule of severity critical matched waits until the central store acknowledged its row (docs/deployment.md, "Durability levels"); commit and fsync are the old names of process and disk' },
  { name: 'GOV_CENTRAL_ACK_TIMEOUT_MS', modes: ['sidecar'], default: '2000', help: 'with GOV_LEDGER_DURABILITY=central: how long a critical call waits for the central acknowledgement before it is refused with 503 (its row stays committed locally and ships later)' },
  { name: 'GOV_LEDGER_MAX_PENDING_ROWS', modes: ['embedded', 'gateway', 'sidecar'], default: '10000', help: 'rows waiting for the disk from which new calls wait (backpressure); calls already started always record' },
  { name: 'GOV_LEDGER_BACKPRESSURE_WAIT_MS', modes: ['embedded', 'gateway', 'sidecar'], default: '5000', help: 'how long a new call waits for the ledger to catch up before a 503 with Retry-After' },
  { name: 'GOV_AUDIT_MAX_TEXT_CHARS', modes: ['embedded', 'gateway', 'sidecar'], default: '65536', help: 'longest string a row stores whole; a longer one is stored as its first this-many characters plus its length and SHA-256 (the decision still reads all of it)' },
  { name: 'GOV_AUDIT_ENCRYPTION_KEY', modes: ['embedded', 'gateway', 'sidecar'], default: '', help: '32-byte key (64 hex chars or base64): payloads stored AES-256-GCM encrypted' },
  { name: 'GOV_POLICY_DIR', modes: ['embedded', 'gateway', 'sidecar'], default: 'policies', help: 'directory of YAML policy packs' },
  { name: 'GOV_POLICY_WATCH', modes: ['embedded', 'gateway', 'sidecar'], default: 'true', help: 'hot reload: watch GOV_POLICY_DIR and publish/activate changed packs; a bad file keeps the last good version (docs/policies.md)' },
  { name: 'GOV_POLICY_WATCH_INTERVAL_MS', modes: ['embedded', 'gateway', 'sidecar'], default: '2000', help: 'periodic re-read of GOV_POLICY_DIR beside the file watch (for volumes where file events do not arrive)' },
  { name: 'GOV_MANIFEST_DIR', modes: ['embedded', 'gateway', 'sidecar'], default: 'manifests', help: 'agent manifests (agents/*.yaml) and golden rules (golden/*.yaml; a legacy golden.yaml is still read)' },
  { name: 'GOV_STATE_REFRESH_MS', modes: ['embedded', 'gateway', 'sidecar'], default: '1000', help: 'how often the kill switch, registered manifests and active policy set are re-read from the store, so a change made through another replica applies here within this many ms (plus one read); 0 reads them at start only' },
  { name: 'GOV_SHUTDOWN_GRACE_MS', modes: ['embedded', 'gateway', 'sidecar'], default: '10000', help: 'on SIGTERM, how long requests in flight on the API port may take before their connections are cut, so that a stalled client cannot hold the exit past a pod\'s grace period (the sidecar\'s proxy port has GOV_PROXY_SHUTDOWN_GRACE_MS)' },
  { name: 'GOV_HEALTH_TIMEOUT_MS', modes: ['embedded', 'gateway', 'sidecar'], default: '500', help: 'the longest a health request waits on each store probe; a store that has not answered by then is reported down (error timeout)' },
  { name: 'GOV_REVIEW_SLA_MINUTES', modes: ['embedded', 'gateway', 'sidecar'], default: '240', help: 'review_deadline = decision time + this many minutes' },
  ...DETECTOR_SETTING_DOCS,
  { name: 'GOV_INGEST_SOURCES', modes: ['gateway'], default: '', help: 'which source chains each ingest caller may write: subject=glob|glob;... (api-key-<n>, a JWT sub); `*=` refuses callers bound nowhere. A JWT may carry its own `sources` claim instead' },
  { name: 'GOV_INGEST_MAX_BYTES', modes: ['gateway'], default: '67108864', help: 'largest replication batch POST /v1/audit/ingest takes, counted after gzip decompression (413 above)' },
  { name: 'GOV_CENTRAL_URL', modes: ['sidecar'], default: '', help: 'the central gateway (http/https base URL): with GOV_KEY set, the sidecar ships its ledger rows there (replication, docs/deployment.md)' },
  { name: 'GOV_KEY', modes: ['sidecar'], default: '', help: 'the sidecar\'s key on the central gateway (an X-Gov-Token with the audit.ingest capability, tier team or above)' },
  { name: 'GOV_REPLICATION_BATCH_ROWS', modes: ['sidecar'], default: '500', help: 'rows per shipped batch at most (also at most ~4 MB of rows)' },
  { name: 'GOV_REPLICATION_DELAY_MS', modes: ['sidecar'], default: '200', help: 'how often the shipper looks for new rows once it has caught up; bounds the replication lag of a healthy fleet' },
  { name: 'GOV_REPLICATION_RETRY_MAX_MS', modes: ['sidecar'], default: '30000', help: 'longest wait between attempts while the central gateway is unreachable or refuses (backoff doubles from GOV_REPLICATION_DELAY_MS)' },
  { name: 'GOV_REPLICATION_MAX_BACKLOG_ROWS', modes: ['sidecar'], default: '0', help: 'rows not yet acknowledged by the central store from which new calls are refused with 503 (fail closed) until it catches up; warned at 80 %; 0: bounded only by the ledger\'s disk' },
  { name: 'GOV_REPLICATION_PRUNE_AFTER', modes: ['sidecar'], default: 'off', help: 'drop the local payload of rows the central store acknowledged once they are this old (e.g. 30m, 12h, 7d); header, chain and cursor stay' },
  ...REDIS_SETTING_DOCS,
  ...HEAP_SETTING_DOCS,
  ...QUEUE_SETTING_DOCS,
  { name: 'GOV_LOG_LEVEL', modes: ['embedded', 'gateway', 'sidecar'], default: 'info', help: 'pino log level (fatal|error|warn|info|debug|trace|silent)' },
  { name: 'GOV_PROXY_PORT', modes: ['sidecar'], default: '15080', help: 'port of the governing proxy that agents point their SDK base URL at' },
  { name: 'GOV_PROXY_HOST', modes: ['sidecar'], default: '127.0.0.1', help: 'address the proxy binds (the agent shares the pod, so loopback is enough)' },
  ...fixedRoutes().map((r) => ({ name: r.env, modes: ['sidecar'] as Mode[], default: r.url, help: `where /${r.kind}/* is forwarded` })),
  { name: 'GOV_UPSTREAM_MCP_<NAME>', modes: ['sidecar'], default: '', help: 'an MCP server (streamable HTTP) served at /mcp/<name>/*; <NAME> is lowercased' },
  { name: 'GOV_UPSTREAM_TOOL_<NAME>', modes: ['sidecar'], default: '', help: 'a plain HTTP tool served at /tools/<name>/*; <NAME> is lowercased' },
  { name: 'GOV_PROXY_ROUTES', modes: ['sidecar'], default: '', help: 'YAML routes file naming MCP and tool upstreams (format in docs/proxy-routes.md)' },
  { name: 'GOV_AGENT_ID', modes: ['sidecar'], default: 'unknown', help: "the pod's agent: every proxied call (and API rate-limit bucket) is this agent's unless X-Agent-ID names one GOV_PROXY_AGENT_IDS allows" },
  { name: 'GOV_PROXY_AGENT_IDS', modes: ['sidecar'], default: '', help: 'further agents callers may name in X-Agent-ID (comma-separated, or * for any); any other X-Agent-ID is refused with 403' },
  { name: 'GOV_PROXY_ESCALATE', modes: ['sidecar'], default: 'hold', help: 'escalate outcome: hold (403 naming the review envelope) or release (forward/deliver, still queued for review)' },
  { name: 'GOV_PROXY_GUARD_WINDOW_CHARS', modes: ['sidecar'], default: '128', help: 'streamed text held back until the text after it has been checked; must cover the longest pattern a policy must catch' },
  { name: 'GOV_PROXY_MAX_ANSWER_BYTES', modes: ['sidecar'], default: '16777216', help: 'largest upstream answer, streamed or not; past it a whole answer is refused (502) and a stream ends with a provider-format error, the held part withheld and its SHA-256 recorded' },
  { name: 'GOV_PROXY_UPSTREAM_TIMEOUT_MS', modes: ['sidecar'], default: '600000', help: 'upstream timeout: wait for response headers, and the longest pause between body chunks' },
  { name: 'GOV_PROXY_SHUTDOWN_GRACE_MS', modes: ['sidecar'], default: '30000', help: 'on SIGTERM, how long in-flight proxied calls may take to finish before they are cut' },
]);

const DEV_ENVS = new Set(['development', 'dev', 'test']);

const bool = z
  .string()
  .trim()
  .toLowerCase()
  .transform((v, ctx) => {
    if (['1', 'true', 'yes', 'on'].includes(v)) return true;
    if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
    ctx.addIssue({ code: 'custom', message: `expected a boolean, got "${v}"` });
    return z.NEVER;
  });

const port = z.coerce.number().int().min(0).max(65535);

/**
 * GOV_LEDGER_DURABILITY's levels, weakest first. `commit` and `fsync`, the setting's values before the
 * levels had names, still mean `process` and `disk`.
 */
export const DURABILITY_LEVELS = ['process', 'disk', 'central'] as const;
export type DurabilityLevel = (typeof DURABILITY_LEVELS)[number];
const DURABILITY_LEVEL = z
  .string()
  .transform((v) => (v === 'commit' ? 'process' : v === 'fsync' ? 'disk' : v))
  .pipe(z.enum(DURABILITY_LEVELS, { message: `expected one of ${DURABILITY_LEVELS.join(', ')} (or commit, fsync)` }));
const tier = z.enum(['free', 'developer', 'team', 'enterprise']);

const apiKeys = z
  .string()
  .transform((raw, ctx) => {
    const keys: Array<{ key: string; tier: z.infer<typeof tier> }> = [];
    for (const part of raw.split(',').map((p) => p.trim()).filter(Boolean)) {
      const at = part.lastIndexOf(':');
      const t = tier.safeParse(part.slice(at + 1));
      if (at <= 0 || !t.success) {
        ctx.addIssue({ code: 'custom', message: 'GOV_API_KEYS entries must be key:tier with tier free|developer|team|enterprise' });
        return z.NEVER;
      }
      keys.push({ key: part.slice(0, at), tier: t.data });
    }
    return keys;
  });

export interface Settings {
  mode: Mode;
  env: string;
  isDev: boolean;
  host: string;
  port: number;
  dbPath: string;
  /** GOV_DATABASE_URL (gateway only): the central PostgreSQL store instead of the LMDB ledger at dbPath. */
  databaseUrl: string | null;
  /** GOV_SOURCE_ID: the `source` of every row this process writes. */
  sourceId: string;
  /** Head anchor (ledger/head-anchor.ts): its file (null: off), HMAC key and write interval. */
  ledgerAnchor: { file: string; key: string | null; intervalMs: number } | null;
  embedToken: string | null;
  authEnabled: boolean;
  apiKeys: Array<{ key: string; tier: 'free' | 'developer' | 'team' | 'enterprise' }>;
  jwtSecret: string | null;
  /** GOV_JWT_AUDIENCE / GOV_JWT_ISSUER: claims a JWT must carry, when set. */
  jwtAudience: string | null;
  jwtIssuer: string | null;
  maxBodyBytes: number;
  envKillSwitch: boolean;
  rateLimitEnabled: boolean;
  rateLimitFile: string;
  minSdkVersion: string | null;
  auditEncryptionKey: string | null;
  /** GOV_AUDIT_MAX_TEXT_CHARS: longest string stored whole in a row's payload (ledger/bounded-payload.ts). */
  auditMaxTextChars: number;
  /** GOV_LEDGER_DURABILITY: when a call may be answered (docs/deployment.md, "Durability levels"). */
  ledgerDurability: DurabilityLevel;
  /** GOV_CENTRAL_ACK_TIMEOUT_MS: a critical call's longest wait for the central store at level `central`. */
  centralAckTimeoutMs: number;
  ledgerMaxPendingRows: number;
  ledgerBackpressureWaitMs: number;
  policyDir: string;
  /** GOV_POLICY_WATCH: hot reload of policyDir (runtime/policy-watcher.ts). */
  policyWatch: boolean;
  policyWatchIntervalMs: number;
  manifestDir: string;
  /** GOV_STATE_REFRESH_MS: the bound on how stale the kill switch, manifests and policy set may be (0: read at start only). */
  stateRefreshMs: number;
  reviewSlaMinutes: number;
  /** GOV_HEALTH_TIMEOUT_MS: the bound on each health probe, so a health request never hangs on a dead store. */
  healthTimeoutMs: number;
  /** GOV_SHUTDOWN_GRACE_MS: on close, how long the API port's requests in flight may take before their connections are cut. */
  shutdownGraceMs: number;
  logLevel: string;
  /** The optional remote classifier (GOV_DETECTOR_*); null when GOV_DETECTOR_URL is unset. */
  detector: DetectorSettings | null;
  /** The gateway's shared rate-limit store (GOV_REDIS_*); null: limits are counted in process. */
  redis: RedisSettings | null;
  /** The job queues (review push, later the judge) and the reliability cache (GOV_REVIEW_WEBHOOK_*, GOV_QUEUE_*). */
  queues: QueueSettings;
  /** Sidecar only; null in the other modes. */
  proxy: ProxySettings | null;
  /** GOV_INGEST_MAX_BYTES: the ingest endpoint's body limit after decompression (gateway). */
  ingestMaxBytes: number;
  /** GOV_INGEST_SOURCES: which source chains each ingest caller may write (config/ingest-sources.ts). */
  ingestSources: IngestSourceRules;
  /** Sidecar replication to the central gateway; null unless GOV_CENTRAL_URL and GOV_KEY are both set. */
  replication: ReplicationSettings | null;
}

export interface ReplicationSettings {
  centralUrl: string;
  key: string;
  batchRows: number;
  delayMs: number;
  retryMaxMs: number;
  /** GOV_REPLICATION_PRUNE_AFTER in ms; null: payloads are kept. */
  pruneAfterMs: number | null;
  /** GOV_REPLICATION_MAX_BACKLOG_ROWS; 0: no bound but the disk. */
  maxBacklogRows: number;
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `off` or a number with a unit (ms, s, m, h, d), e.g. 30m or 7d. */
export function parseDuration(raw: string): number | null {
  const v = raw.trim().toLowerCase();
  if (v === 'off' || v === '') return null;
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(v);
  if (!m) throw new SettingsError(`GOV_REPLICATION_PRUNE_AFTER: "${raw}" is not off or a duration such as 30m, 12h or 7d`);
  return Number(m[1]) * DURATION_UNITS[m[2]];
}

export interface ProxySettings {
  port: number;
  host: string;
  /** Upstream URL of each fixed route (protocols/registry.ts), by route kind: GOV_UPSTREAM_OPENAI... */
  upstreams: Readonly<Record<string, string>>;
  /** Named MCP and tool upstreams: the GOV_PROXY_ROUTES file, then GOV_UPSTREAM_MCP_<NAME> / GOV_UPSTREAM_TOOL_<NAME>. */
  namedRoutes: ProxyRoutes;
  routesFile: string | null;
  defaultAgentId: string;
  /** GOV_PROXY_AGENT_IDS: agents besides GOV_AGENT_ID that X-Agent-ID may name (agent-identity.ts). */
  otherAgents: ReadonlySet<string> | 'any';
  escalate: 'hold' | 'release';
  guardWindowChars: number;
  /** GOV_PROXY_MAX_ANSWER_BYTES: largest upstream answer read, streamed or not. */
  maxAnswerBytes: number;
  upstreamTimeoutMs: number;
  shutdownGraceMs: number;
  /** GOV_SIDECAR_RELEASE_STARTUP_PAGES (runtime/startup-pages.ts). */
  releaseStartupPages: boolean;
}

export class SettingsError extends Error {}

function shipped(cwd: string, rel: string): string {
  const local = resolve(cwd, rel);
  return existsSync(local) ? local : resolve(PACKAGE_ROOT, rel);
}

/** Parses the environment once into a typed Settings object; throws SettingsError naming the bad setting. */
export function loadSettings(mode: Mode, rawEnv: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): Settings {
  let env: NodeJS.ProcessEnv;
  try {
    env = withSecretFiles(rawEnv);
  } catch (e) {
    if (e instanceof SecretFileError) throw new SettingsError(e.message);
    throw e;
  }
  const get = (k: string): string | undefined => {
    const v = env[k];
    return v === undefined || v === '' ? undefined : v;
  };
  const parse = <T>(name: string, schema: z.ZodType<T>, raw: string): T => {
    const r = schema.safeParse(raw);
    if (!r.success) throw new SettingsError(`${name}: ${r.error.issues.map((i) => i.message).join('; ')}`);
    return r.data;
  };
  const govEnv = get('GOV_ENV') ?? 'development';
  const isDev = DEV_ENVS.has(govEnv.toLowerCase());
  const embeddedApi = mode !== 'gateway';
  const authEnabled = embeddedApi ? true : parse('AUTH_ENABLED', bool, get('AUTH_ENABLED') ?? String(!isDev));
  const logLevel = get('GOV_LOG_LEVEL') ?? 'info';
  parse('GOV_LOG_LEVEL', z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']), logLevel);

  const settings: Settings = {
    mode,
    env: govEnv,
    isDev,
    host: get('GOV_HOST') ?? '127.0.0.1',
    port: embeddedApi ? parse('GOV_EMBED_PORT', port, get('GOV_EMBED_PORT') ?? '8765') : parse('GOV_PORT', port, get('GOV_PORT') ?? '8000'),
    dbPath: embeddedApi ? (get('GOV_EMBED_DB') ?? resolve(cwd, '.gov/ledger')) : (get('GOV_DB_PATH') ?? resolve(cwd, '.gov/gateway')),
    databaseUrl: mode === 'gateway' ? (get('GOV_DATABASE_URL') ?? null) : null,
    sourceId: parse('GOV_SOURCE_ID', SourceId, get('GOV_SOURCE_ID') ?? defaultSourceId(mode)),
    embedToken: get('GOV_EMBED_TOKEN') ?? null,
    authEnabled,
    apiKeys: parse('GOV_API_KEYS', apiKeys, get('GOV_API_KEYS') ?? ''),
    jwtSecret: get('GOV_JWT_SECRET') ?? null,
    jwtAudience: get('GOV_JWT_AUDIENCE') || null,
    jwtIssuer: get('GOV_JWT_ISSUER') || null,
    maxBodyBytes: parse('GOV_MAX_BODY_BYTES', z.coerce.number().int().min(1024).max(1024 * 1024 * 1024), get('GOV_MAX_BODY_BYTES') ?? String(5 * 1024 * 1024)),
    envKillSwitch: parse('GOV_KILL_SWITCH', bool, get('GOV_KILL_SWITCH') ?? '0'),
    rateLimitEnabled: parse('RATE_LIMIT_ENABLED', bool, get('RATE_LIMIT_ENABLED') ?? String(!isDev)),
    rateLimitFile: get('GOV_RATE_LIMIT_FILE') ?? shipped(cwd, 'manifests/rate-limits.yaml'),
    minSdkVersion: get('GOV_MIN_SDK_VERSION') ?? null,
    auditEncryptionKey: get('GOV_AUDIT_ENCRYPTION_KEY') ?? null,
    auditMaxTextChars: parse('GOV_AUDIT_MAX_TEXT_CHARS', z.coerce.number().int().min(256).max(64 * 1024 * 1024), get('GOV_AUDIT_MAX_TEXT_CHARS') ?? '65536'),
    ledgerAnchor: null,
    ledgerDurability: parse('GOV_LEDGER_DURABILITY', DURABILITY_LEVEL, get('GOV_LEDGER_DURABILITY') ?? (mode === 'sidecar' ? 'process' : 'disk')),
    centralAckTimeoutMs: parse('GOV_CENTRAL_ACK_TIMEOUT_MS', z.coerce.number().int().min(10).max(600_000), get('GOV_CENTRAL_ACK_TIMEOUT_MS') ?? '2000'),
    ledgerMaxPendingRows: parse('GOV_LEDGER_MAX_PENDING_ROWS', z.coerce.number().int().min(1).max(10_000_000), get('GOV_LEDGER_MAX_PENDING_ROWS') ?? '10000'),
    ledgerBackpressureWaitMs: parse('GOV_LEDGER_BACKPRESSURE_WAIT_MS', z.coerce.number().int().min(0).max(600_000), get('GOV_LEDGER_BACKPRESSURE_WAIT_MS') ?? '5000'),
    policyDir: get('GOV_POLICY_DIR') ?? shipped(cwd, 'policies'),
    policyWatch: parse('GOV_POLICY_WATCH', bool, get('GOV_POLICY_WATCH') ?? 'true'),
    policyWatchIntervalMs: parse('GOV_POLICY_WATCH_INTERVAL_MS', z.coerce.number().int().min(100).max(3_600_000), get('GOV_POLICY_WATCH_INTERVAL_MS') ?? '2000'),
    manifestDir: get('GOV_MANIFEST_DIR') ?? shipped(cwd, 'manifests'),
    stateRefreshMs: parse('GOV_STATE_REFRESH_MS', z.coerce.number().int().min(0).max(3_600_000), get('GOV_STATE_REFRESH_MS') ?? '1000'),
    reviewSlaMinutes: parse('GOV_REVIEW_SLA_MINUTES', z.coerce.number().int().min(1).max(525600), get('GOV_REVIEW_SLA_MINUTES') ?? '240'),
    healthTimeoutMs: parse('GOV_HEALTH_TIMEOUT_MS', z.coerce.number().int().min(1).max(60_000), get('GOV_HEALTH_TIMEOUT_MS') ?? '500'),
    shutdownGraceMs: parse('GOV_SHUTDOWN_GRACE_MS', z.coerce.number().int().min(0).max(3_600_000), get('GOV_SHUTDOWN_GRACE_MS') ?? '10000'),
    logLevel,
    detector: loadDetectorSettings(get, parse),
    redis: loadRedisSettings(mode, get, parse),
    queues: loadQueueSettings(get, parse),
    proxy: mode === 'sidecar' ? loadProxySettings(env, get, parse) : null,
    ingestSources: parse('GOV_INGEST_SOURCES', IngestSourcesSetting, get('GOV_INGEST_SOURCES') ?? ''),
    ingestMaxBytes: parse('GOV_INGEST_MAX_BYTES', z.coerce.number().int().min(64 * 1024).max(1024 * 1024 * 1024), get('GOV_INGEST_MAX_BYTES') ?? String(64 * 1024 * 1024)),
    replication: mode === 'sidecar' ? loadReplicationSettings(get, parse) : null,
  };

  if (mode === 'gateway' && !settings.authEnabled && !isDev) {
    throw new SettingsError(`AUTH_ENABLED=false is refused when GOV_ENV=${govEnv}: auth must be on outside development`);
  }
  if (mode === 'gateway' && settings.authEnabled && settings.apiKeys.length === 0 && !settings.jwtSecret) {
    throw new SettingsError('auth is enabled but neither GOV_API_KEYS nor GOV_JWT_SECRET is set: no caller could authenticate');
  }
  if (settings.jwtSecret !== null && Buffer.byteLength(settings.jwtSecret) < 32) {
    throw new SettingsError('GOV_JWT_SECRET must be at least 32 bytes for HS256');
  }
  const anchorFile = get('GOV_LEDGER_ANCHOR_FILE') ?? `${settings.dbPath.replace(/\/+$/, '')}.anchor.json`;
  const anchorKey = get('GOV_LEDGER_ANCHOR_KEY') || null;
  if (anchorKey !== null && Buffer.byteLength(anchorKey) < 32) throw new SettingsError('GOV_LEDGER_ANCHOR_KEY must be at least 32 bytes');
  if (embeddedApi && !isDev && settings.embedToken === null && settings.dbPath === ':memory:') {
    // Outside development a generated token is written beside the ledger, never printed (cli/generated-token.ts).
    throw new SettingsError(`GOV_EMBED_TOKEN or GOV_EMBED_TOKEN_FILE must be set when GOV_ENV=${govEnv} and GOV_EMBED_DB=:memory:: a generated token is printed only in development, and there is no ledger directory to write it beside`);
  }
  if (settings.databaseUrl !== null) checkDatabaseUrl(settings.databaseUrl);
  if (settings.ledgerDurability === 'central' && settings.replication === null) {
    throw new SettingsError('GOV_LEDGER_DURABILITY=central needs a sidecar replicating to a central gateway (GOV_CENTRAL_URL and GOV_KEY)');
  }
  // The head anchor is a file beside a local ledger; the central store keeps head records instead.
  if (anchorFile !== 'off' && settings.dbPath !== ':memory:' && settings.databaseUrl === null) {
    settings.ledgerAnchor = { file: anchorFile, key: anchorKey, intervalMs: parse('GOV_LEDGER_ANCHOR_INTERVAL_MS', z.coerce.number().int().min(10).max(3_600_000), get('GOV_LEDGER_ANCHOR_INTERVAL_MS') ?? '1000') };
  }
  if (settings.minSdkVersion !== null) {
    parse('GOV_MIN_SDK_VERSION', z.string().regex(/^\d+\.\d+\.\d+/, 'must be a semantic version such as 1.2.0'), settings.minSdkVersion);
  }
  return settings;
}

/** A postgres:// URL; the message never repeats it (it may carry a password). */
function checkDatabaseUrl(raw: string): void {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new SettingsError('GOV_DATABASE_URL: not a URL (expected postgres://user:password@host:5432/database)');
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') throw new SettingsError('GOV_DATABASE_URL: must be a postgres:// or postgresql:// URL');
}

function loadReplicationSettings(
  get: (k: string) => string | undefined,
  parse: <T>(name: string, schema: z.ZodType<T>, raw: string) => T,
): ReplicationSettings | null {
  const central = get('GOV_CENTRAL_URL');
  const key = get('GOV_KEY');
  if (central === undefined && key === undefined) return null;
  if (central === undefined || key === undefined) throw new SettingsError('replication needs both GOV_CENTRAL_URL and GOV_KEY (or neither)');
  return {
    centralUrl: upstreamUrl('GOV_CENTRAL_URL', central),
    key,
    batchRows: parse('GOV_REPLICATION_BATCH_ROWS', z.coerce.number().int().min(1).max(10_000), get('GOV_REPLICATION_BATCH_ROWS') ?? '500'),
    delayMs: parse('GOV_REPLICATION_DELAY_MS', z.coerce.number().int().min(1).max(3_600_000), get('GOV_REPLICATION_DELAY_MS') ?? '200'),
    retryMaxMs: parse('GOV_REPLICATION_RETRY_MAX_MS', z.coerce.number().int().min(1).max(3_600_000), get('GOV_REPLICATION_RETRY_MAX_MS') ?? '30000'),
    pruneAfterMs: parseDuration(get('GOV_REPLICATION_PRUNE_AFTER') ?? 'off'),
    maxBacklogRows: parse('GOV_REPLICATION_MAX_BACKLOG_ROWS', z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER), get('GOV_REPLICATION_MAX_BACKLOG_ROWS') ?? '0'),
  };
}

function upstreamUrl(name: string, raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new SettingsError(`${name}: not a URL: ${raw}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new SettingsError(`${name}: must be an http or https URL`);
  if (u.search !== '' || u.hash !== '') throw new SettingsError(`${name}: must not carry a query or fragment`);
  return u.href.replace(/\/+$/, '');
}

function loadProxySettings(
  env: NodeJS.ProcessEnv,
  get: (k: string) => string | undefined,
  parse: <T>(name: string, schema: z.ZodType<T>, raw: string) => T,
): ProxySettings {
  let namedRoutes: ProxyRoutes;
  try {
    namedRoutes = loadProxyRoutes(env, get('GOV_PROXY_ROUTES'));
  } catch (e) {
    if (e instanceof ProxyRoutesError) throw new SettingsError(e.message);
    throw e;
  }
  const defaultAgentId = get('GOV_AGENT_ID') ?? 'unknown';
  if (!AGENT_ID.test(defaultAgentId)) throw new SettingsError('GOV_AGENT_ID: must match ^[\\w\\-\\.]+$');
  const otherAgents = parseAgentList(get('GOV_PROXY_AGENT_IDS') ?? '');
  if (otherAgents === null) throw new SettingsError('GOV_PROXY_AGENT_IDS: a comma-separated list of agent ids (each matching ^[\\w\\-\\.]+$), or *');
  return {
    port: parse('GOV_PROXY_PORT', port, get('GOV_PROXY_PORT') ?? '15080'),
    host: get('GOV_PROXY_HOST') ?? '127.0.0.1',
    upstreams: Object.fromEntries(fixedRoutes().map((r) => [r.kind, upstreamUrl(r.env, get(r.env) ?? r.url)])),
    namedRoutes,
    routesFile: get('GOV_PROXY_ROUTES') ?? null,
    defaultAgentId,
    otherAgents,
    escalate: parse('GOV_PROXY_ESCALATE', z.enum(['hold', 'release']), (get('GOV_PROXY_ESCALATE') ?? 'hold').toLowerCase()),
    // Below 16 chars not even an AWS key id fits in the window, so a secret could leak half-released.
    guardWindowChars: parse('GOV_PROXY_GUARD_WINDOW_CHARS', z.coerce.number().int().min(16).max(1_000_000), get('GOV_PROXY_GUARD_WINDOW_CHARS') ?? '128'),
    maxAnswerBytes: parse('GOV_PROXY_MAX_ANSWER_BYTES', z.coerce.number().int().min(1024).max(1024 * 1024 * 1024), get('GOV_PROXY_MAX_ANSWER_BYTES') ?? String(16 * 1024 * 1024)),
    upstreamTimeoutMs: parse('GOV_PROXY_UPSTREAM_TIMEOUT_MS', z.coerce.number().int().min(1).max(86_400_000), get('GOV_PROXY_UPSTREAM_TIMEOUT_MS') ?? '600000'),
    shutdownGraceMs: parse('GOV_PROXY_SHUTDOWN_GRACE_MS', z.coerce.number().int().min(0).max(3_600_000), get('GOV_PROXY_SHUTDOWN_GRACE_MS') ?? '30000'),
    releaseStartupPages: parse('GOV_SIDECAR_RELEASE_STARTUP_PAGES', bool, get('GOV_SIDECAR_RELEASE_STARTUP_PAGES') ?? 'true'),
  };
}

export function settingsHelp(mode: Mode): string {
  const rows = SETTING_DOCS.filter((d) => d.modes.includes(mode));
  const width = Math.max(...rows.map((r) => r.name.length));
  return rows.map((r) => `  ${r.name.padEnd(width)}  ${r.help} (default: ${r.default || 'unset'})`).join('\n');
}
