// `gov policy replay` over rows the sidecar wrote for proxied OpenAI calls: they are ordinary pre_check and
// post_check rows (with the proxy's metadata), replayed while the sidecar keeps running.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { openAiCompletion, startMockUpstream } from '../helpers/mock-upstreams.js';
import { runCli } from '../helpers/gov-process.js';
import { startSidecar } from '../helpers/sidecar.js';
import { REFUND_RULE, ROOT } from '../helpers/replay-ledger.js';

const REFUND = 'Thanks for reaching out. I am glad to tell you that your refund is issued to you today. ';
const BENIGN = 'Thanks for reaching out about order 1234. I am glad to help you with that question today. ';

t.test('sidecar rows replay as pre_check/post_check rows', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-replay-sidecar-'));
  const policyDir = join(dir, 'policies');
  mkdirSync(policyDir);
  copyFileSync(join(ROOT, 'policies/default.yaml'), join(policyDir, 'default.yaml'));
  const candidate = join(dir, 'next.yaml');
  writeFileSync(candidate, `${readFileSync(join(ROOT, 'policies/default.yaml'), 'utf8')}${REFUND_RULE}`);
  let answer = REFUND;
  const mock = await startMockUpstream(() => ({ json: openAiCompletion(answer) }));
  const ledger = join(dir, 'ledger');
  const sc = await startSidecar({ openai: mock.url, env: { GOV_EMBED_DB: ledger, GOV_POLICY_DIR: policyDir } });
  t.teardown(async () => {
    await sc.close();
    await mock.close();
    rmSync(dir, { recursive: true, force: true });
  });
  t.equal((await sc.api('PUT', '/v1/agents/proxy-bot/manifest', { tools: [] })).status, 200);

  const call = async () => {
    const res = await fetch(`${sc.proxyUrl}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-caller-0123456789abcdef', 'x-agent-id': 'proxy-bot' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'system', content: 'You are a support bot.' }, { role: 'user', content: 'Where is order 1234, and my refund?' }] }),
    });
    await res.text();
    t.equal(res.status, 200);
    t.equal(res.headers.get('x-gov-decision'), 'approve');
    return { post: res.headers.get('x-gov-envelope-id')!, pre: res.headers.get('x-gov-pre-check-envelope-id')! };
  };
  const refund = await call();
  answer = BENIGN;
  const benign = await call();

  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.GOV_AUDIT_ENCRYPTION_KEY;
  const r = await runCli(['policy', 'replay', '--db', ledger, '--policies', policyDir, '--version', candidate, '--json'], env, 60_000);
  t.equal(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout);
  t.equal(report.rows.replayed, 4, 'two pre-checks and two post-checks');
  t.same(report.transitions, [
    { from: 'approve', to: 'approve', count: 3 },
    { from: 'approve', to: 'block', count: 1 },
  ]);
  t.equal(report.examples.length, 1);
  t.equal(report.examples[0].envelope_id, refund.post);
  t.equal(report.examples[0].phase, 'post_check');
  t.equal(report.examples[0].agent_id, 'proxy-bot');
  t.same(report.examples[0].rules_added, ['refund-promise']);
  t.not(report.examples[0].envelope_id, benign.post);
  t.equal(report.drift, 0);
});
