// Ledger benchmark (part of `npm run bench`; also `node bench/ledger.js`, after `npm run build`):
// append throughput with durable acknowledgements (group commit) and chain-verify throughput, on a
// fresh temporary LMDB ledger with ~1 KB canonical payloads.
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { newEnvelopeId } from '../dist/ledger/envelope-id.js';
import { openLmdbStorage } from '../dist/ledger/lmdb.js';

const ROWS = Number(process.env.LEDGER_BENCH_ROWS ?? 200_000);
/** Appends awaiting their commit at any time, as concurrent requests would keep them. */
const IN_FLIGHT = Number(process.env.LEDGER_BENCH_IN_FLIGHT ?? 4_000);
/** Appends issued per macrotask: requests arrive as many small tasks, not one synchronous burst. */
const CHUNK = Number(process.env.LEDGER_BENCH_CHUNK ?? 64);
/** Distinct payload objects, built before timing: making test data is not the ledger's work. */
const PAYLOADS = 8192;

/** A validate request and its response, about 1 KB in canonical form (as JSON.parse would give it). */
function payload(i) {
  return JSON.parse(
    JSON.stringify({
      request: {
        agent_id: `agent-${i % 16}`,
        framework: 'REST',
        version: '1.0',
        sdk_version: '1.0.0',
        request: { user: `u-${i % 1000}`, input: `What is the status of order ${i}?`, session_id: null, metadata: {} },
        execution: {
          model: 'gpt-4o-mini',
          tools_called: [{ name: 'lookup_order', args: { order_id: String(i) } }],
          tool_results: [{ name: 'lookup_order', output: { order_id: String(i), status: 'shipped' } }],
          latency_ms: 420,
          tokens: 180,
        },
        output: { answer: `Order ${i} has shipped and should arrive within three business days.`, sources: ['lookup_order'] },
      },
      response: {
        validation: { schema_score: 100, evidence_score: 92, tool_trust_score: 100, consistency_score: 95, policy_score: 100, final_confidence: 88.5, failures: [] },
        risk: { tier: 'low', score: 12.5, reason: 'all factors low' },
        decision: { outcome: 'approve', reason: 'all checks passed', policy_version: 'default@1', score_version: 'score@1' },
        note: randomBytes(150).toString('base64'),
      },
    }),
  );
}

async function measure(idOf, encryptionKey) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gov-ledger-bench-'));
  const storage = await openLmdbStorage(dir, { encryptionKey });
  try {
    const { ledger } = storage;
    const payloads = Array.from({ length: PAYLOADS }, (_, i) => payload(i));
    const entry = (i) => ({
      envelope_id: idOf(),
      phase: 'validate',
      agent_id: `agent-${i % 16}`,
      decision: 'approve',
      risk_tier: 'low',
      confidence: 88.5,
      timestamp: new Date().toISOString(),
      parent_envelope_id: null,
      policy_version: 'default@1',
      score_version: 'score@1',
      payload: payloads[i % PAYLOADS],
    });

    const t0 = process.hrtime.bigint();
    let issued = 0;
    let outstanding = 0;
    await new Promise((resolve, reject) => {
      let failed = false;
      const done = () => {
        outstanding--;
        if (issued === ROWS && outstanding === 0) resolve();
      };
      const fail = (err) => {
        failed = true;
        reject(err);
      };
      const issue = () => {
        if (failed) return;
        const n = Math.min(CHUNK, ROWS - issued, IN_FLIGHT - outstanding);
        for (let k = 0; k < n; k++) {
          outstanding++;
          ledger.append(entry(issued++)).then(done, fail);
        }
        if (issued < ROWS) setImmediate(issue);
      };
      issue();
    });
    const appendSeconds = Number(process.hrtime.bigint() - t0) / 1e9;

    const t1 = process.hrtime.bigint();
    const result = await ledger.verify();
    const verifySeconds = Number(process.hrtime.bigint() - t1) / 1e9;
    if (!result.valid || result.rows_checked !== ROWS) throw new Error(`verify failed: ${JSON.stringify(result)}`);
    return { append: Math.round(ROWS / appendSeconds), verify: Math.round(ROWS / verifySeconds) };
  } finally {
    await storage.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** bench/ledger-mapped.js in its own process: ledger file size and how much of it is mapped (resident). */
function mapped() {
  const out = execFileSync(process.execPath, [fileURLToPath(new URL('./ledger-mapped.js', import.meta.url))], { encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').pop());
}

export default async function run() {
  const map = mapped();
  const timeOrdered = await measure(newEnvelopeId);
  const random = await measure(randomUUID);
  const encrypted = await measure(newEnvelopeId, randomBytes(32));
  return {
    'ledger append rows/s': timeOrdered.append,
    'chain verify rows/s': timeOrdered.verify,
    'ledger append rows/s (random v4 envelope ids)': random.append,
    'ledger append rows/s (AES-256-GCM payloads)': encrypted.append,
    'chain verify rows/s (AES-256-GCM payloads)': encrypted.verify,
    [`ledger file MB after ${map.rows} rows in 16-row commits`]: map.file_mb,
    'ledger file MB mapped (file-backed RSS)': map.mapped_mb,
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  console.log(await run());
}
