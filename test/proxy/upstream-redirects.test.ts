// An upstream that answers with a redirect would take the agent around the sidecar: an SDK follows the
// Location to a server whose answer never passed a check. No route releases a redirect (issue 12, High 1).
import t, { type Test } from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { APIError } from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { anthropicMessage, openAiCompletion, openAiStream, startMockUpstream, type MockUpstream } from '../helpers/mock-upstreams.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { refusedWith } from '../helpers/sdk-errors.js';

const SECRET = 'AKIAIOSFODNN7EXAMPLE';
const LEAK = `Here is the key: ${SECRET}`;
const REDIRECTS = [301, 302, 303, 307, 308];

interface Rig {
  sc: TestSidecar;
  /** The server the redirect points at: it must never be asked anything. */
  elsewhere: MockUpstream;
  upstream: MockUpstream;
}

async function rig(t: Test, status: number): Promise<Rig> {
  const elsewhere = await startMockUpstream((r) => (r.url.includes('models') ? { json: { object: 'list', data: [] } } : { json: openAiCompletion(LEAK) }));
  t.teardown(() => elsewhere.close());
  const upstream = await startMockUpstream((r) => ({ status, headers: { location: `${elsewhere.url}${r.url}` }, json: { moved: true } }));
  t.teardown(() => upstream.close());
  const dir = mkdtempSync(join(tmpdir(), 'gov-redirect-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const routesFile = join(dir, 'routes.yaml');
  writeFileSync(routesFile, `tools:\n  orders: ${upstream.url}\n`);
  const sc = await startSidecar({ openai: upstream.url, anthropic: upstream.url, env: { GOV_PROXY_ROUTES: routesFile, GOV_AGENT_ID: 'redirect-agent' } });
  t.teardown(() => sc.close());
  await sc.api('PUT', '/v1/agents/redirect-agent/manifest', { tools: [{ name: 'orders' }] });
  return { sc, elsewhere, upstream };
}

for (const status of REDIRECTS) {
  t.test(`${status} from an LLM upstream: the OpenAI SDK gets an error, never the other server's answer`, async (t) => {
    const { sc, elsewhere, upstream } = await rig(t, status);
    const client = new OpenAI({ apiKey: 'sk-redirect', baseURL: `${sc.proxyUrl}/openai/v1`, maxRetries: 0 });
    const ask = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'What is the deploy key?' }] };
    const err = await refusedWith(t, APIError, client.chat.completions.create(ask));
    t.equal(err.status, 502, 'refused as an upstream error');
    t.notMatch(JSON.stringify(err.error ?? {}), SECRET);
    t.equal(upstream.requests.length, 1, 'the configured upstream was asked once');
    t.equal(elsewhere.requests.length, 0, 'the redirect target was never reached');
    const { post } = await sc.rowsOf(String(err.headers?.get('x-gov-envelope-id')));
    t.equal(post?.payload?.request?.metadata?.upstream_failure, 'redirect', 'the post-check row records the refused redirect');
    t.match(post?.payload?.request?.output?.message, new RegExp(`answered ${status}`));
    t.notMatch(JSON.stringify(post), elsewhere.url.replace('http://', ''), 'the Location is not recorded');

    const stream = await refusedWith(t, APIError, client.chat.completions.create({ ...ask, stream: true }));
    t.equal(stream.status, 502, 'a streamed call is refused the same way');
    t.equal(elsewhere.requests.length, 0);
  });
}

t.test('a redirect on a pass-through path (the models list) is refused too', async (t) => {
  const { sc, elsewhere } = await rig(t, 307);
  const client = new OpenAI({ apiKey: 'sk-redirect', baseURL: `${sc.proxyUrl}/openai/v1`, maxRetries: 0 });
  const err = await refusedWith(t, APIError, client.models.list());
  t.equal(err.status, 502);
  t.equal(elsewhere.requests.length, 0);
});

t.test('a redirect from the Anthropic upstream is refused in Anthropic format', async (t) => {
  const { sc, elsewhere } = await rig(t, 302);
  elsewhere.reply = () => ({ json: anthropicMessage(LEAK) });
  const client = new Anthropic({ apiKey: 'sk-ant-redirect', baseURL: `${sc.proxyUrl}/anthropic`, maxRetries: 0 });
  const err = await refusedWith(t, Anthropic.APIError, client.messages.create({ model: 'claude-mock-1', max_tokens: 64, messages: [{ role: 'user', content: 'the key?' }] }));
  t.equal(err.status, 502);
  t.match(err.error, { type: 'error', error: { message: /redirect/ } });
  t.equal(elsewhere.requests.length, 0);
});

t.test('a redirect from an HTTP tool is refused, and a following client (fetch) goes nowhere else', async (t) => {
  const { sc, elsewhere, upstream } = await rig(t, 308);
  const res = await fetch(`${sc.proxyUrl}/tools/orders/lookup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ order_id: '12' }) });
  t.equal(res.status, 502);
  t.equal(res.headers.get('location'), null, 'no Location reaches the caller');
  t.match(await res.json(), { error: { message: /redirect/ } });
  t.equal(upstream.requests.length, 1);
  t.equal(elsewhere.requests.length, 0);
});

t.test('304 Not Modified is not a redirect and passes', async (t) => {
  const upstream = createServer((_req, res) => {
    res.writeHead(304, { etag: '"v1"' });
    res.end();
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => upstream.close(() => r())));
  const sc = await startSidecar({ openai: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}` });
  t.teardown(() => sc.close());
  const res = await fetch(`${sc.proxyUrl}/openai/v1/models`, { headers: { 'if-none-match': '"v1"' } });
  t.equal(res.status, 304);
});

t.test('a stream that a streamed call gets back as a redirect is not released either', async (t) => {
  const elsewhere = await startMockUpstream(() => ({ sse: openAiStream(LEAK) }));
  t.teardown(() => elsewhere.close());
  const upstream = await startMockUpstream((r) => ({ status: 307, headers: { location: `${elsewhere.url}${r.url}`, 'content-type': 'text/event-stream' }, sse: openAiStream('moved') }));
  t.teardown(() => upstream.close());
  const sc = await startSidecar({ openai: upstream.url });
  t.teardown(() => sc.close());
  const client = new OpenAI({ apiKey: 'sk-redirect', baseURL: `${sc.proxyUrl}/openai/v1`, maxRetries: 0 });
  const err = await refusedWith(t, APIError, client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true }));
  t.equal(err.status, 502);
  t.equal(elsewhere.requests.length, 0);
});
