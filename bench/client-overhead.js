// Client wrapper overhead: one call at a time through govern() against an embedded gateway started in this
// process (loopback HTTP, the real engine, a :memory: ledger so that the figure is the client's and the
// API's, not the disk's). The wrapped function does nothing, so a call's time is the governance it adds:
// two-phase is a pre-check and a post-check (two requests), single-shot one validate.
import { GovClient, govern } from '../dist/client/index.js';
import { startEmbeddedGateway } from '../dist/client/embedded.js';
import { percentile } from './timing.js';

const ITERATIONS = Number(process.env.BENCH_CLIENT_ITERATIONS ?? 2000);
const WARMUP = Number(process.env.BENCH_CLIENT_WARMUP ?? 300);

async function samples(fn) {
  const args = { user: 'u-42', input: 'What is the status of order 1234?', order_id: '1234' };
  for (let i = 0; i < WARMUP; i++) await fn(args);
  const out = new Float64Array(ITERATIONS);
  for (let i = 0; i < ITERATIONS; i++) {
    const t0 = process.hrtime.bigint();
    await fn(args);
    out[i] = Number(process.hrtime.bigint() - t0) / 1e6;
  }
  return out.sort();
}

export default async function run() {
  const gw = await startEmbeddedGateway({ port: 0, db: ':memory:', env: { GOV_ENV: 'development', RATE_LIMIT_ENABLED: 'false', GOV_POLICY_WATCH: 'false' } });
  try {
    const client = new GovClient({ gatewayUrl: gw.url, apiKey: gw.token, failureMode: 'closed', raiseOnError: true, env: {} });
    const body = async () => ({ answer: 'Order 1234 has shipped.', sources: ['lookup_order'] });
    const twoPhase = await samples(govern(body, { agentId: 'support-bot', client, model: 'gpt-4o-mini' }));
    const singleShot = await samples(govern(body, { agentId: 'support-bot', client, model: 'gpt-4o-mini', mode: 'single-shot' }));
    const bare = await samples(body);
    return {
      'client two-phase overhead p50 ms': percentile(twoPhase, 50) - percentile(bare, 50),
      'client two-phase overhead p99 ms': percentile(twoPhase, 99) - percentile(bare, 99),
      'client single-shot overhead p50 ms': percentile(singleShot, 50) - percentile(bare, 50),
      'client single-shot overhead p99 ms': percentile(singleShot, 99) - percentile(bare, 99),
    };
  } finally {
    await gw.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await run());
