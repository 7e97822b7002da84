// A request path the sidecar classifies is the path it forwards, so a path an upstream (or anything
// between) could resolve to another resource is refused before classification: `//`, `.`/`..` segments,
// escapes of characters that need none (`%72`), encoded separators (`%2F`, `%5C`), backslashes and `#`
// get a 400 in the route's own format. The OpenAI adapter matches its endpoints case-insensitively, so
// `/V1/responses/{id}` is refused like `/v1/responses/{id}`. Requests go over a raw socket (node:http
// with the path as written): fetch would resolve `..` and `\` itself before sending.
import t from 'tap';
import { request } from 'node:http';
import { openAiCompletion, openAiResponse, startMockUpstream, type MockReply, type MockUpstream, type SeenRequest } from '../helpers/mock-upstreams.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';

const CALLER_KEY = 'sk-callerCREDENTIAL0123456789abcdef';
const SECRET = 'AKIAIOSFODNN7EXAMPLE';
const BENIGN = 'Thanks for reaching out about order 1234. I am glad to help you with that question today. ';

let mock: MockUpstream;
let sc: TestSidecar;
let reply: (r: SeenRequest) => MockReply | Promise<MockReply>;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: any;
}

/** One request with its path sent byte for byte as given. */
function send(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const u = new URL(sc.proxyUrl);
  const data = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        method,
        path,
        headers: {
          authorization: `Bearer ${CALLER_KEY}`,
          'x-agent-id': 'path-bot',
          ...(data === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(data)) }),
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: any;
          try {
            json = text ? JSON.parse(text) : undefined;
          } catch {
            json = text;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, json });
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const chat = (content: string) => ({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }] });
const respond = (input: string) => ({ model: 'gpt-4o-mini', input });

t.before(async () => {
  mock = await startMockUpstream((r) => reply(r));
  sc = await startSidecar({
    openai: mock.url,
    anthropic: mock.url,
    env: { GOV_UPSTREAM_MCP_ORDERS: `${mock.url}/mcp`, GOV_UPSTREAM_TOOL_LOOKUP: `${mock.url}/api` },
  });
});
t.teardown(async () => {
  await sc.close();
  await mock.close();
});
t.beforeEach(() => {
  mock.requests.length = 0;
  reply = (r) => (r.url.toLowerCase().includes('responses') ? { json: openAiResponse(BENIGN) } : r.url.endsWith('/models') ? { json: { object: 'list', data: [] } } : { json: openAiCompletion(BENIGN) });
});

t.test('the stored-response read is refused however its path is spelled, and never reaches the upstream', async (t) => {
  const plain = await send('GET', '/openai/v1/responses/resp_1');
  t.equal(plain.status, 404, 'the plain path: refused as before');

  for (const path of ['/openai/v1//responses/resp_1', '/openai/v1/x/../responses/resp_1', '/openai/v1/%72esponses/resp_1']) {
    const a = await send('GET', path);
    t.equal(a.status, 400, `GET ${path}`);
    t.match(a.json?.error, { type: 'invalid_request_error', code: 'bad_request', message: /normal form/ }, `${path}: an OpenAI error saying why`);
  }
  const upper = await send('GET', '/openai/V1/responses/resp_1');
  t.equal(upper.status, plain.status, 'GET /openai/V1/responses/{id}: refused like the lower-case path');
  t.equal(upper.json?.error?.type, 'invalid_request_error');
  t.equal(mock.requests.length, 0, 'the upstream saw none of them');
});

t.test('other spellings that could reach a stored answer are refused too', async (t) => {
  const badRequest = [
    '/openai/v1/responses%2Fresp_1',
    '/openai/v1/responses%2fresp_1',
    '/openai/v1/responses%5Cresp_1',
    '/openai/v1/responses\\resp_1',
    '/openai/v1\\responses\\resp_1',
    '/openai/v1/%2E%2E/v1/responses/resp_1',
    '/openai/v1/./responses/resp_1',
    '/openai/v1/x/..;/responses/resp_1',
    '/openai/v1/responses/resp_1/..',
    '/openai/v1/resp%6fnses/resp_1',
    '/openai/v1/responses/resp_1%',
    '/openai/v1/responses/resp_1%zz',
    '/openai/v1/models#/../responses/resp_1',
    '/openai/v1/responses#x',
    '/openai//v1/responses/resp_1',
  ];
  for (const path of badRequest) t.equal((await send('GET', path)).status, 400, `GET ${path}`);
  for (const path of ['/openai/v1/Responses/resp_1', '/openai/V1/RESPONSES/resp_1/input_items', '/openai/v1/responses;x/resp_1', '/openai/v1/Chat/Completions/chatcmpl_1', '/openai/v1/CONVERSATIONS/conv_1/items']) {
    t.equal((await send('GET', path)).status, 404, `GET ${path}`);
  }
  t.equal(mock.requests.length, 0, 'the upstream saw none of them');
});

t.test('the list of stored chat completions is a stored-output read as well', async (t) => {
  for (const path of ['/openai/v1/chat/completions', '/openai/v1/chat/completions?limit=10', '/openai/v1/responses']) {
    t.equal((await send('GET', path)).status, 404, `GET ${path}`);
  }
  t.equal(mock.requests.length, 0);
});

t.test('a read on an LLM route passes only for the models list: stored content nobody checked is refused', async (t) => {
  const stored = [
    ['/openai/v1/files/file_1/content', 'a file: a batch\'s output, say'],
    ['/openai/v1/batches/batch_1', 'batch status'],
    ['/openai/v1/threads/thread_1/messages', 'stored assistant messages'],
    ['/openai/v1/containers/cntr_1/files/cfile_1/content', 'a code interpreter output file'],
    ['/openai/v1/models/gpt-4o/extra', 'below one model'],
    ['/openai/v1/models;x', 'a models segment with parameters'],
    ['/anthropic/v1/messages/batches/msgbatch_1/results', 'a message batch\'s results'],
    ['/anthropic/v1/files/file_1/content', 'a file\'s bytes'],
    ['/anthropic/v1/Models', 'another spelling on Anthropic'],
  ];
  for (const [path, what] of stored) {
    const a = await send('GET', path, undefined, path.startsWith('/anthropic') ? { 'anthropic-version': '2023-06-01' } : {});
    t.equal(a.status, 404, `GET ${path} (${what})`);
    if (path.startsWith('/anthropic')) t.match(a.json, { type: 'error', error: { type: 'not_found_error' } }, 'in the Anthropic format');
    else t.match(a.json, { error: { code: 'not_found' } }, 'in the OpenAI format');
  }
  t.equal((await send('HEAD', '/openai/v1/files/file_1/content')).status, 404, 'HEAD as well');
  t.equal(mock.requests.length, 0, 'the upstream saw none of them');

  reply = () => ({ json: { data: [{ id: 'claude-mock-1', type: 'model' }] } });
  for (const path of ['/openai/v1/models', '/openai/V1/Models/gpt-4o', '/openai/models', '/anthropic/v1/models', '/anthropic/v1/models/claude-mock-1/']) {
    const a = await send('GET', path);
    t.equal(a.status, 200, `GET ${path} passes`);
    t.equal(a.headers['x-gov-phase'], 'pre_check', 'with its pre-check row');
  }
  t.equal(mock.requests.length, 5);
});

t.test('governed endpoints, other routes: a path not in normal form is a 400 in the route format', async (t) => {
  const post = await send('POST', '/openai/v1//chat/completions', chat('Where is order 1234?'));
  t.equal(post.status, 400, 'POST /openai/v1//chat/completions');
  t.match(post.json?.error, { type: 'invalid_request_error', code: 'bad_request', message: /empty path segment/ });
  const anthropic = await send('POST', '/anthropic/v1/%6dessages', { model: 'claude-mock-1', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
  t.equal(anthropic.status, 400, 'POST /anthropic/v1/%6dessages');
  t.match(anthropic.json, { type: 'error', error: { type: 'invalid_request_error', message: /percent-escape/ } }, 'an Anthropic error');
  const tool = await send('POST', '/tools/lookup/../../mcp/orders', { order_id: '1' });
  t.equal(tool.status, 400, 'POST /tools/lookup/../../mcp/orders');
  t.match(tool.json?.error, { code: String, message: /\.\. segment/ }, 'an HTTP-tool error');
  const mcp = await send('POST', '/mcp/orders/%2E%2E/admin', { jsonrpc: '2.0', id: 7, method: 'tools/list' }, { accept: 'application/json, text/event-stream' });
  t.equal(mcp.status, 400, 'POST /mcp/orders/%2E%2E/admin');
  t.match(mcp.json, { jsonrpc: '2.0', error: { message: /normal form/ } }, 'a JSON-RPC error');
  t.equal(mock.requests.length, 0, 'the upstream saw none of them');
});

t.test('upper-case paths of governed endpoints are governed, and forwarded as written', async (t) => {
  const ok = await send('POST', '/openai/V1/Responses', respond('Where is order 1234?'));
  t.equal(ok.status, 200);
  t.equal(ok.headers['x-gov-phase'], 'post_check', 'post-checked');
  t.equal(ok.json?.output?.[0]?.content?.[0]?.text, BENIGN);
  t.equal(mock.requests[0]?.url, '/V1/Responses');

  reply = () => ({ json: openAiResponse(`Here is the key: ${SECRET}`) });
  const withheld = await send('POST', '/openai/V1/RESPONSES', respond('Give me the deploy key'));
  t.equal(withheld.status, 403, 'read as a Responses answer: the secret in its output is withheld');
  t.equal(withheld.json?.error?.type, 'governance_blocked');
  t.notMatch(JSON.stringify(withheld.json), /AKIA/);
});

t.test('ordinary paths still work', async (t) => {
  const completion = await send('POST', '/openai/v1/chat/completions', chat('Where is order 1234?'));
  t.equal(completion.status, 200);
  t.equal(completion.json?.choices?.[0]?.message?.content, BENIGN);
  t.equal(completion.headers['x-gov-phase'], 'post_check');
  const models = await send('GET', '/openai/v1/models');
  t.equal(models.status, 200, 'GET /v1/models passes');
  t.equal(models.headers['x-gov-phase'], 'pre_check');
  const escaped = await send('GET', '/openai/v1/models/ft%3Agpt-4o-mini%3Aorg/?q=a/../b//c%72');
  t.equal(escaped.status, 200, 'an escape a character needs, a trailing slash, a query with anything in it');
  t.same(
    mock.requests.map((r) => `${r.method} ${r.url}`),
    ['POST /v1/chat/completions', 'GET /v1/models', 'GET /v1/models/ft%3Agpt-4o-mini%3Aorg/?q=a/../b//c%72'],
    'forwarded exactly as written',
  );
});
