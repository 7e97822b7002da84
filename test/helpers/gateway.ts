import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { captureLogger } from './log-capture.js';
import { loadSettings, type Mode } from '../../src/config/settings.js';
import { compose, type Composed } from '../../src/compose/modes.js';
import { WORKED_EXAMPLE } from './worked-example.js';
import { createTestDatabase, sqlOn, type TestDatabase } from './postgres.js';

/**
 * Where startGateway keeps the ledger: LMDB (default), or the central PostgreSQL store when
 * GOV_TEST_LEDGER=postgres (set by test/http/postgres/*.test.ts, which run the HTTP suites again on it).
 */
export type LedgerBackend = 'lmdb' | 'postgres';

export function testLedgerBackend(): LedgerBackend {
  return process.env.GOV_TEST_LEDGER === 'postgres' ? 'postgres' : 'lmdb';
}

/** The database of each gateway directory on PostgreSQL, so that a restart on `dir` finds its rows again. */
const databases = new Map<string, TestDatabase>();

export interface TestGateway {
  /** The store this gateway's ledger is in (a test asserting something only one store has checks it). */
  backend: LedgerBackend;
  /** The PostgreSQL store's URL on that backend, else null. */
  databaseUrl: string | null;
  url: string;
  token: string | null;
  dir: string;
  composed: Composed;
  /** Every log line the gateway wrote, as raw JSON text. */
  logs: string[];
  /** Everything the ledger stored, as latin1 text: the LMDB files, or the store's rows and values in PostgreSQL. */
  storedBytes(): Promise<string>;
  /** Close without removing the ledger directory (for restart tests). */
  stop(): Promise<void>;
  /** Close and remove the ledger directory. */
  close(): Promise<void>;
  /** Send a request; `token` defaults to the mode's credential unless `null` is passed. */
  request(method: string, path: string, opts?: RequestOpts): Promise<TestResponse>;
}

export interface RequestOpts {
  body?: unknown;
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
  token?: string | null;
  contentType?: string;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export interface StartOptions {
  mode?: Mode;
  env?: Record<string, string>;
  /** Reuse a ledger directory (restart tests). */
  dir?: string;
  clock?: () => Date;
  /** Gateway credential sent as X-Gov-Token by default. */
  govToken?: string;
}

/**
 * Starts a real app on an ephemeral port over a fresh ledger (or the one of `dir`). On the PostgreSQL
 * backend the ledger is a database of its own per directory, also in embedded mode (the embedded API over
 * the central store: same routes, same core, bearer auth), unless the test names a ledger itself.
 */
export async function startGateway(opts: StartOptions = {}): Promise<TestGateway> {
  const mode = opts.mode ?? 'embedded';
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'gov-test-'));
  const dbKey = mode === 'embedded' ? 'GOV_EMBED_DB' : 'GOV_DB_PATH';
  const env: Record<string, string> = { GOV_ENV: 'test', GOV_LOG_LEVEL: 'info', [dbKey]: join(dir, 'ledger'), ...opts.env };
  const settings = loadSettings(mode, env, process.cwd());
  const ownsLedger = opts.env?.[dbKey] === undefined && opts.env?.GOV_DATABASE_URL === undefined;
  let database: TestDatabase | null = null;
  if (testLedgerBackend() === 'postgres' && ownsLedger) {
    database = databases.get(dir) ?? (await createTestDatabase());
    databases.set(dir, database);
    settings.databaseUrl = database.url;
    settings.ledgerAnchor = null;
  }
  const backend: LedgerBackend = settings.databaseUrl !== null ? 'postgres' : 'lmdb';
  const { logger, logs } = captureLogger(settings.logLevel);
  const composed = await compose(settings, { clock: opts.clock, logger });
  await composed.app.listen({ port: 0, host: '127.0.0.1' });
  const addr = composed.app.server.address();
  const url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  const defaultToken = mode === 'embedded' ? composed.token : (opts.govToken ?? null);

  const request = async (method: string, path: string, o: RequestOpts = {}): Promise<TestResponse> => {
    const headers: Record<string, string> = { ...o.headers };
    const token = o.token === undefined ? defaultToken : o.token;
    if (token !== null && token !== undefined) {
      if (mode === 'embedded') headers.authorization = `Bearer ${token}`;
      else headers['x-gov-token'] = token;
    }
    let body: string | Buffer | undefined;
    if (o.rawBody !== undefined) body = o.rawBody;
    else if (o.body !== undefined) body = JSON.stringify(o.body);
    if (body !== undefined) headers['content-type'] = o.contentType ?? 'application/json';
    const res = await fetch(url + path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = undefined;
    try {
      parsed = text.length ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };

  const stop = () => composed.close();
  const storedBytes = async (): Promise<string> => {
    if (database) {
      const rows = await sqlOn<{ b: Buffer }>(database, `SELECT row_bytes AS b FROM gov_audit_rows UNION ALL SELECT convert_to(value, 'UTF8') FROM gov_kv`);
      return rows.rows.map((r) => r.b.toString('latin1')).join('');
    }
    const ledgerDir = join(dir, 'ledger');
    return readdirSync(ledgerDir).map((f) => readFileSync(join(ledgerDir, f)).toString('latin1')).join('');
  };
  return {
    storedBytes,
    backend,
    databaseUrl: settings.databaseUrl,
    url,
    token: composed.token,
    dir,
    composed,
    logs,
    stop,
    async close() {
      await composed.close();
      if (!opts.dir) {
        rmSync(dir, { recursive: true, force: true });
        if (database) {
          databases.delete(dir);
          await database.drop();
        }
      }
    },
    request,
  };
}

/** The README's worked example (test/fixtures/worked-example.json, shared with the benchmarks). */
export function workedExample(overrides: Record<string, unknown> = {}): Record<string, any> {
  return { ...structuredClone(WORKED_EXAMPLE), ...overrides };
}

export function preCheckExample(overrides: Record<string, unknown> = {}): Record<string, any> {
  return {
    agent_id: 'support-bot',
    framework: 'REST',
    action: 'lookup_order',
    params: { order_id: '1234' },
    user: 'u-42',
    input: 'What is the status of order 1234?',
    model: 'gpt-4o-mini',
    ...overrides,
  };
}

/** A condition-based wait for fire-and-forget effects: polls until `check` passes or the deadline hits. */
export async function eventually<T>(fn: () => Promise<T>, check: (v: T) => boolean, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (check(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 10));
  }
}
