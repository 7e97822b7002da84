// A Free key reads no scores anywhere (issue 12, Medium 9): not in runtime answers, not in the audit list
// (confidence, risk tier), not in an audit row's stored answer (validation, risk, confidence rationale). A
// Developer key reads them all. Gateway mode with API keys of both tiers.
import t from 'tap';
import { startGateway, workedExample } from '../helpers/gateway.js';

t.test('Free: no scores in runtime answers, audit rows or stored answers; Developer: all of them', async (t) => {
  const gw = await startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'true', GOV_API_KEYS: 'k-free:free,k-dev:developer' }, govToken: 'k-dev' });
  t.teardown(() => gw.close());

  const validated = await gw.request('POST', '/v1/runtime/validate', { body: workedExample(), token: 'k-free' });
  t.equal(validated.status, 200);
  t.notOk('validation' in validated.body || 'risk' in validated.body || 'confidence_rationale' in validated.body, 'the runtime answer has no scores');
  const id = validated.body.envelope_id as string;

  const freeRow = await gw.request('GET', `/v1/audit/executions/${id}`, { token: 'k-free' });
  t.equal(freeRow.status, 200);
  t.equal(freeRow.body.confidence, null, 'the row header hides its confidence');
  t.equal(freeRow.body.risk_tier, null, 'and its risk tier');
  const stored = freeRow.body.payload.response;
  t.equal(stored.decision.outcome, validated.body.decision.outcome, 'the stored answer still shows the decision');
  t.notOk('validation' in stored || 'risk' in stored || 'confidence_rationale' in stored, 'but none of its scores');
  t.notMatch(JSON.stringify(freeRow.body.payload.response), /confidence_rationale|"risk"|final_confidence \d|risk tier (low|medium|high|critical)/, 'nor in the reason, whose scores read hidden');
  t.match(stored.decision.reason, /final_confidence hidden >= \d+ and risk tier hidden/, 'which still says which rule decided');
  t.notMatch(validated.body.decision.reason, /final_confidence \d|risk tier (low|medium|high|critical)/, 'the runtime answer\'s reason too');

  const freeList = await gw.request('GET', '/v1/audit/executions?limit=10', { token: 'k-free' });
  t.ok(freeList.body.items.length > 0);
  t.ok(freeList.body.items.every((r: { confidence: unknown; risk_tier: unknown }) => r.confidence === null && r.risk_tier === null), 'the list hides confidence and risk tier');

  const devRow = await gw.request('GET', `/v1/audit/executions/${id}`, { token: 'k-dev' });
  t.type(devRow.body.confidence, 'number', 'Developer reads the confidence');
  t.type(devRow.body.risk_tier, 'string', 'and the risk tier');
  t.ok(devRow.body.payload.response.validation && devRow.body.payload.response.risk, 'and the stored scores');
  const devList = await gw.request('GET', '/v1/audit/executions?limit=10', { token: 'k-dev' });
  t.ok(devList.body.items.some((r: { confidence: unknown }) => typeof r.confidence === 'number'), 'and the list shows them');
});
