// Forged identity (issue 12, Medium 4): in a pod the agent is the sidecar's GOV_AGENT_ID. A call that names
// another agent in X-Agent-ID is refused before it is decided, forwarded or recorded, unless
// GOV_PROXY_AGENT_IDS lists that agent; the embedded API's rate-limit bucket follows the same rule.
import t from 'tap';
import OpenAI from 'openai';
import { openAiCompletion, startMockUpstream, type MockUpstream } from '../helpers/mock-upstreams.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { refusedWith } from '../helpers/sdk-errors.js';

const POD = 'pod-bot';
let mock: MockUpstream;

t.before(async () => {
  mock = await startMockUpstream(() => ({ json: openAiCompletion('Your refund of 5000 is on its way.') }));
});
t.teardown(() => mock.close());

const client = (sc: TestSidecar, agent?: string) =>
  new OpenAI({ baseURL: `${sc.proxyUrl}/openai/v1`, apiKey: 'sk-caller', maxRetries: 0, defaultHeaders: agent === undefined ? {} : { 'X-Agent-ID': agent } });
const ask = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Refund order 1234' }] };

async function rowCount(sc: TestSidecar): Promise<number> {
  return (await sc.api('GET', '/v1/audit/executions?limit=1000')).body.items.length;
}

t.test('by default only the pod agent: another X-Agent-ID is refused with 403, never forwarded nor recorded', async (t) => {
  const sc = await startSidecar({ openai: mock.url, env: { GOV_AGENT_ID: POD, GOV_PROXY_AGENT_IDS: '' } });
  t.teardown(() => sc.close());
  const forwarded = mock.requests.length;
  const rows = await rowCount(sc);

  const err = await refusedWith(t, OpenAI.APIError, client(sc, 'ops-bot').chat.completions.create(ask));
  t.equal((err as InstanceType<typeof OpenAI.APIError>).status, 403);
  t.match((err as Error).message, /ops-bot is not an agent this sidecar acts for/);
  t.equal(mock.requests.length, forwarded, 'the upstream never saw it');
  t.equal(await rowCount(sc), rows, 'and the ledger records no row under the forged agent');
  t.ok(sc.logs.some((l) => l.includes('refused a call naming another agent')), 'the refusal is logged');

  // The pod's own agent, named or not, is served and recorded as itself.
  for (const agent of [undefined, POD]) {
    const { response } = await client(sc, agent).chat.completions.create(ask).withResponse();
    const { post } = await sc.rowsOf(response.headers.get('x-gov-envelope-id')!);
    t.equal(post.agent_id, POD, `recorded as ${POD} (X-Agent-ID ${agent ?? 'absent'})`);
  }
});

t.test('GOV_PROXY_AGENT_IDS lists the further agents a sidecar acts for', async (t) => {
  const sc = await startSidecar({ openai: mock.url, env: { GOV_AGENT_ID: POD, GOV_PROXY_AGENT_IDS: 'helper-bot, ops-bot' } });
  t.teardown(() => sc.close());
  const { response } = await client(sc, 'ops-bot').chat.completions.create(ask).withResponse();
  const { post } = await sc.rowsOf(response.headers.get('x-gov-envelope-id')!);
  t.equal(post.agent_id, 'ops-bot', 'a listed agent is served as itself');
  await refusedWith(t, OpenAI.APIError, client(sc, 'other-bot').chat.completions.create(ask));
});

t.test("the embedded API's rate-limit bucket cannot be moved to another agent by naming it", async (t) => {
  const sc = await startSidecar({ openai: mock.url, env: { GOV_AGENT_ID: POD, GOV_PROXY_AGENT_IDS: '', RATE_LIMIT_ENABLED: 'true' } });
  t.teardown(() => sc.close());
  const validate = (agent?: string) =>
    fetch(`${sc.apiUrl}/v1/runtime/validate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sc.token}`, 'content-type': 'application/json', ...(agent === undefined ? {} : { 'x-agent-id': agent }) },
      body: JSON.stringify({ agent_id: POD, version: '1', request: { user: 'u', input: 'status?' }, execution: { model: 'm' }, output: { answer: 'shipped' } }),
    });
  const own = await validate();
  t.equal(own.status, 200);
  t.equal(own.headers.get('x-ratelimit-agent'), POD, "without the header the bucket is the pod agent's");
  const forged = await validate('ops-bot');
  t.equal(forged.status, 403, 'a header naming another agent is refused');
  t.equal(((await forged.json()) as { error: { code: string } }).error.code, 'forbidden', 'with the JSON error body');
});

t.test('a GOV_PROXY_AGENT_IDS entry that is not an agent id is a settings error', async (t) => {
  await t.rejects(startSidecar({ env: { GOV_PROXY_AGENT_IDS: 'ok-bot,not ok' } }), /GOV_PROXY_AGENT_IDS/);
});
