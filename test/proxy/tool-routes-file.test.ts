import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadSettings } from '../../src/config/settings.js';
import { ADAPTERS } from '../../src/proxy/protocols/registry.js';
import { loadProxyRoutes, parseProxyRoutesFile, ProxyRoutesError } from '../../src/proxy/routes-file.js';
import { buildRouteTable } from '../../src/proxy/routes.js';
import { ToolCallLinks } from '../../src/proxy/tool-call-links.js';

const DOC_EXAMPLE = `
# Named upstreams of the sidecar
mcp:
  orders:
    url: http://orders-mcp.internal:8080/mcp
    timeout_ms: 30000
  crm: https://crm.example.com/mcp/
tools:
  weather: http://weather.internal:9000/api
  Billing:
    url: http://billing.internal:9000
`;

t.test('the documented format parses', async (t) => {
  const r = parseProxyRoutesFile(DOC_EXAMPLE);
  t.same([...r.mcp.values()], [
    { name: 'orders', url: 'http://orders-mcp.internal:8080/mcp', timeoutMs: 30000 },
    { name: 'crm', url: 'https://crm.example.com/mcp/', timeoutMs: null },
  ]);
  t.same([...r.tools.values()], [
    { name: 'weather', url: 'http://weather.internal:9000/api', timeoutMs: null },
    { name: 'billing', url: 'http://billing.internal:9000/', timeoutMs: null },
  ]);
  t.equal(r.tools.get('billing')!.name, 'billing', 'names are stored lower-case (routes match them case-insensitively)');
  t.same(parseProxyRoutesFile(''), { mcp: new Map(), tools: new Map() }, 'an empty file is no routes');
  t.same(parseProxyRoutesFile('mcp:\ntools:\n'), { mcp: new Map(), tools: new Map() });
});

t.test('bad files are refused with the path of the problem', async (t) => {
  const bad: Array<[string, RegExp]> = [
    ['mcp: [1, 2', /not valid YAML/],
    ['mcp:\n  a: ftp://x/\n', /mcp\.a.*http or https/],
    ['mcp:\n  a: not a url\n', /not an absolute URL/],
    ['mcp:\n  a: http://user:pw@x/\n', /credentials/],
    ['tools:\n  a: http://x/?k=v\n', /query or fragment/],
    ['tools:\n  "bad name": http://x/\n', /route name/],
    ['tools:\n  a: http://x/\n  A: http://y/\n', /given twice/],
    ['tools:\n  a: { url: http://x/, timeout_ms: -1 }\n', /timeout_ms/],
    ['tools:\n  a: { url: http://x/, retries: 3 }\n', /retries|Unrecognized/],
    ['upstreams:\n  a: http://x/\n', /upstreams|Unrecognized/],
  ];
  for (const [text, re] of bad) t.throws(() => parseProxyRoutesFile(text, 'routes.yaml'), { name: 'ProxyRoutesError', message: re }, text.replace(/\n/g, ' | '));
  try {
    parseProxyRoutesFile('mcp: 1');
    t.fail('expected a throw');
  } catch (e) {
    t.ok(e instanceof ProxyRoutesError);
  }
});

t.test('the environment adds and overrides routes, keeping the file timeout', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-routes-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'routes.yaml');
  writeFileSync(file, DOC_EXAMPLE);
  const r = loadProxyRoutes({
    GOV_PROXY_ROUTES: file,
    GOV_UPSTREAM_MCP_ORDERS: 'http://127.0.0.1:7000/mcp',
    GOV_UPSTREAM_MCP_SEARCH_V2: 'http://127.0.0.1:7001/mcp',
    GOV_UPSTREAM_TOOL_CALC: ' http://127.0.0.1:7002 ',
    GOV_UPSTREAM_TOOL_EMPTY: '',
    GOV_UPSTREAM_OPENAI: 'http://127.0.0.1:7003',
  });
  t.same(r.mcp.get('orders'), { name: 'orders', url: 'http://127.0.0.1:7000/mcp', timeoutMs: 30000 });
  t.same(r.mcp.get('search_v2'), { name: 'search_v2', url: 'http://127.0.0.1:7001/mcp', timeoutMs: null });
  t.same(r.tools.get('calc'), { name: 'calc', url: 'http://127.0.0.1:7002/', timeoutMs: null });
  t.notOk(r.tools.has('empty'), 'an empty variable is unset');
  t.notOk(r.mcp.has('openai') || r.tools.has('openai'));
  t.equal(r.tools.size, 3);

  t.same(loadProxyRoutes({}), { mcp: new Map(), tools: new Map() }, 'no file, no variables: no named routes');
  t.same([...loadProxyRoutes({ GOV_PROXY_ROUTES: '' }).mcp], []);
  t.same([...loadProxyRoutes({}, file).mcp.keys()], ['orders', 'crm'], 'an explicit path wins over the environment');
  t.throws(() => loadProxyRoutes({ GOV_PROXY_ROUTES: join(dir, 'missing.yaml') }), { message: /cannot read .*ENOENT/ });
  t.throws(() => loadProxyRoutes({ GOV_UPSTREAM_TOOL_X: 'file:///etc/passwd' }), { message: /GOV_UPSTREAM_TOOL_X: .*http or https/ });
  t.throws(() => loadProxyRoutes({ 'GOV_UPSTREAM_TOOL_A.B': 'http://x/' }), { message: /route name/ });
});

t.test('the sidecar routes /mcp/{name} and /tools/{name} to their URL joined with the rest of the path', async (t) => {
  const settings = loadSettings('sidecar', {
    GOV_ENV: 'test',
    GOV_EMBED_DB: ':memory:',
    GOV_UPSTREAM_MCP_ORDERS: 'http://h:1/mcp',
    GOV_UPSTREAM_MCP_SLASHED: 'http://h:1/mcp/',
    GOV_UPSTREAM_TOOL_ROOT: 'http://h:2/',
  });
  const table = buildRouteTable(settings.proxy!, ADAPTERS, { manifest: () => null, links: new ToolCallLinks() });
  const to = (path: string) => {
    const m = table.match(path);
    if (m === null) return null;
    return 'refused' in m ? ['refused', m.route.name] : [m.route.kind, m.route.name, m.route.target.origin + m.upstreamPath];
  };
  t.same(to('/mcp/orders'), ['mcp', 'orders', 'http://h:1/mcp']);
  t.same(to('/mcp/ORDERS/x/y?a=1'), ['mcp', 'orders', 'http://h:1/mcp/x/y?a=1'], 'names are case-insensitive; the query is kept');
  t.same(to('/mcp/slashed'), ['mcp', 'slashed', 'http://h:1/mcp/'], 'a trailing slash the route asks for is kept');
  t.same(to('/mcp/slashed/x'), ['mcp', 'slashed', 'http://h:1/mcp/x']);
  t.same(to('/tools/root/x?q=2'), ['tool', 'root', 'http://h:2/x?q=2']);
  t.equal(to('/mcp/nope'), null, 'an unknown name matches no route (404 in the caller format)');
  t.equal(to('/tools/orders'), null, 'MCP and tool names are separate');
  t.equal(table.match('/mcp/orders')!.route.adapter.framework, 'MCP', 'each kind gets its adapter, with nothing injected');
  t.equal(table.match('/tools/root')!.route.adapter.framework, 'REST');
});
