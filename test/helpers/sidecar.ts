import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { captureLogger } from './log-capture.js';
import { loadSettings } from '../../src/config/settings.js';
import { composeSidecar, type Sidecar } from '../../src/compose/sidecar.js';

export interface TestSidecar {
  proxyUrl: string;
  apiUrl: string;
  token: string;
  sidecar: Sidecar;
  logs: string[];
  /** GET/PUT/POST on the embedded API with the bearer token. */
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  /** Both ledger rows of a proxied call, found from the envelope id the caller got (pre or post). */
  rowsOf(envelopeId: string): Promise<{ pre: any; post: any }>;
  close(): Promise<void>;
}

export interface SidecarStart {
  openai?: string;
  anthropic?: string;
  env?: Record<string, string>;
}

/** A sidecar in this process on ephemeral ports, over a fresh LMDB ledger, with its log lines captured. */
export async function startSidecar(o: SidecarStart = {}): Promise<TestSidecar> {
  const dir = mkdtempSync(join(tmpdir(), 'gov-proxy-test-'));
  const env: Record<string, string> = {
    GOV_ENV: 'test',
    GOV_LOG_LEVEL: 'debug',
    GOV_EMBED_DB: join(dir, 'ledger'),
    GOV_EMBED_TOKEN: 'test-embed-token-0123456789',
    GOV_UPSTREAM_OPENAI: o.openai ?? 'http://127.0.0.1:9',
    GOV_UPSTREAM_ANTHROPIC: o.anthropic ?? 'http://127.0.0.1:9',
    // Tests name many agents through one sidecar; test/proxy/agent-identity.test.ts covers the default rule.
    GOV_PROXY_AGENT_IDS: '*',
    ...o.env,
  };
  const settings = loadSettings('sidecar', env, process.cwd());
  const { logger, logs } = captureLogger(settings.logLevel);
  const sidecar = await composeSidecar(settings, { logger });
  const { proxyUrl, apiUrl } = await sidecar.listen({ proxyPort: 0, apiPort: 0 });
  const token = sidecar.composed.token!;

  const api = async (method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(apiUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };

  const rowsOf = async (envelopeId: string) => {
    const first = (await api('GET', `/v1/audit/executions/${envelopeId}`)).body;
    if (first?.phase === 'pre_check') {
      const list = (await api('GET', '/v1/audit/executions?limit=1000')).body.items as any[];
      const post = list.find((r) => r.parent_envelope_id === envelopeId && r.phase === 'post_check');
      return { pre: first, post: post ? (await api('GET', `/v1/audit/executions/${post.envelope_id}`)).body : null };
    }
    const pre = (await api('GET', `/v1/audit/executions/${first.parent_envelope_id}`)).body;
    return { pre, post: first };
  };

  return {
    proxyUrl,
    apiUrl,
    token,
    sidecar,
    logs,
    api,
    rowsOf,
    async close() {
      await sidecar.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
