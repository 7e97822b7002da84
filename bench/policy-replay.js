// `gov policy replay` speed: 100,000 stored rows re-decided under a candidate pack.
// Run after `npm run build`: `node bench/policy-replay.js [rows]`, or import and call run() from bench/run.js.
//
// The ledger is written through the real Governor and LMDB adapter (durability `commit`, as a sidecar may
// run), so rows, payloads and stored outcomes are what the gateway stores: half validate rows (the worked
// example with a ~1-2 KB answer), half pre_check + post_check pairs as the sidecar records them, over four
// agents, a few of them carrying what the candidate blocks. The candidate is the default pack with one
// more rule (a file replacing the active pack of the same name, the usual case). Timed: opening the ledger
// read-only and replaying every row under the candidate and the baseline (both re-evaluated per row), with
// the default threads (one per core), on one thread, and without the baseline. Median of 3 runs each, and
// the CPU time per row of the one-thread runs (a loaded machine inflates wall time, hardly CPU time).
// The same rows are then written to a fresh database on the machine's PostgreSQL (BENCH_PG_URL, as
// bench/postgres.js) and replayed from the central store (`--database-url`: one thread, batches fetched by
// key in one read-only snapshot); skipped with a message when PostgreSQL is unreachable.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SCORING_CONFIG } from '../dist/engine/scoring-config.js';
import { openLmdbStorage } from '../dist/ledger/lmdb.js';
import { loadGoldenRules } from '../dist/policy/golden.js';
import { loadManifestDir } from '../dist/policy/manifest-files.js';
import { activePolicySet, resolveCandidate } from '../dist/policy/replay-candidate.js';
import { runReplay, runStoreReplay } from '../dist/policy/replay-run.js';
import { Governor } from '../dist/runtime/governor.js';
import { KillSwitch } from '../dist/runtime/kill-switch.js';
import { ManifestRegistry } from '../dist/runtime/manifest-registry.js';
import { ReviewQueue } from '../dist/runtime/review-queue.js';
import { paddedWorkedExample } from './worked-example.js';
import { admin, withDatabase } from './postgres.js';

const root = (p) => fileURLToPath(new URL(`../${p}`, import.meta.url));
const ROWS = Number(process.argv[2] ?? 100_000);
const RUNS = 3;
const AGENTS = ['support-bot', 'billing-eu', 'billing-us', 'triage'];
const EXTRA_RULE = `
  - id: bench-no-refund-promise
    description: Promising a refund in the answer
    targets: [output]
    pattern: "refund (is|has been) (approved|issued)"
    flags: i
    effect: block
`;

/** Every agent declares the support-bot's tools, so outcomes turn on content and policy, not tool trust. */
async function agentManifests() {
  const bot = (await loadManifestDir(root('manifests/agents'))).find((m) => m.agent_id === 'support-bot').manifest;
  return AGENTS.map((agent_id) => ({ agent_id, manifest: bot }));
}

function validateBody(i) {
  const body = paddedWorkedExample(1024 + (i % 8) * 128);
  body.agent_id = AGENTS[i % AGENTS.length];
  body.request.input = `What is the status of order ${1000 + (i % 9000)}?`;
  if (i % 50 === 0) body.output.answer += ' Your refund has been approved.';
  return body;
}

function preCheckBody(i) {
  return { agent_id: AGENTS[i % AGENTS.length], action: 'lookup_order', params: { order_id: String(1000 + (i % 9000)) }, user: `u-${i % 300}`, input: `Where is order ${1000 + (i % 9000)}?`, model: 'gpt-4o-mini' };
}

function postCheckBody(preId, i) {
  const ex = validateBody(i);
  return { pre_check_envelope_id: preId, execution: ex.execution, output: ex.output };
}

async function writeLedger(storage, rules) {
  const governor = new Governor({
    ledger: storage.ledger,
    killSwitch: await KillSwitch.open(storage.kv, false),
    manifests: await ManifestRegistry.open(storage.kv, await agentManifests()),
    reviewQueue: new ReviewQueue(storage.kv),
    rules: () => rules,
    useHistoricalReliability: false,
    reviewSlaMinutes: 60,
    backpressureWaitMs: 60_000,
    maxStoredTextChars: 65_536,
    clock: () => new Date(),
  });
  let written = 0;
  let i = 0;
  while (written < ROWS) {
    const batch = [];
    for (let k = 0; k < 64 && written < ROWS; k++, i++) {
      if (i % 2 === 0 || written + 1 >= ROWS) {
        batch.push(governor.validate(validateBody(i)));
        written += 1;
      } else {
        // The sidecar's way: decide the pre-check, record it with its post-check.
        const pre = governor.preCheckDecided(preCheckBody(i));
        const held = { request: preCheckBody(i), envelopeId: pre.response.envelope_id, outcome: pre.response.decision.outcome };
        batch.push(pre.record(), governor.postCheckDeferred(held, postCheckBody(held.envelopeId, i)).committed);
        written += 2;
      }
    }
    await Promise.all(batch);
  }
  await storage.close();
}

async function postgresReachable() {
  try {
    await admin('SELECT 1');
    return true;
  } catch (e) {
    console.error(`policy-replay: PostgreSQL unreachable (${e.message}); the central-store replay is skipped`);
    return false;
  }
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

export default async function run() {
  const dir = mkdtempSync(join(tmpdir(), 'gov-bench-replay-'));
  try {
    const policyDir = join(dir, 'policies');
    mkdirSync(policyDir);
    copyFileSync(root('policies/default.yaml'), join(policyDir, 'default.yaml'));
    const candidateFile = join(dir, 'default-next.yaml');
    writeFileSync(candidateFile, readFileSync(root('policies/default.yaml'), 'utf8').replace(/^version: .*$/m, 'version: 9.9.9') + EXTRA_RULE);

    const golden = await loadGoldenRules(root('manifests'));
    const active = { policies: (await activePolicySet(policyDir)).set, golden, config: SCORING_CONFIG };
    const t0 = performance.now();
    await writeLedger(await openLmdbStorage(join(dir, 'ledger'), { durability: 'commit' }), active);
    console.error(`policy-replay: wrote ${ROWS} rows in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    const candidate = (await resolveCandidate(candidateFile, { policyDir })).sources;
    const job = {
      dbPath: join(dir, 'ledger'),
      candidate,
      baseline: (await activePolicySet(policyDir)).sources,
      manifestDir: root('manifests'),
      manifests: await agentManifests(),
      since: null,
      agent: null,
      examples: 5,
    };
    const once = async (extra) => {
      const started = performance.now();
      const cpu = process.cpuUsage();
      const report = await runReplay({ ...job, ...extra });
      const used = process.cpuUsage(cpu);
      cpuPerRow.push((used.user + used.system) / ROWS);
      if (report.rows.scanned !== ROWS) throw new Error(`replay scanned ${report.rows.scanned} rows, expected ${ROWS}`);
      if (report.changed === 0) throw new Error('the candidate changed no decision: the bench ledger lost its refund answers');
      return { seconds: (performance.now() - started) / 1000, report };
    };
    const withBaseline = [];
    const cpuPerRow = [];
    const oneThreadCpu = [];
    const defaultCpu = [];
    const oneThread = [];
    const storedOnly = [];
    for (let r = 0; r < RUNS; r++) {
      const at = cpuPerRow.length;
      withBaseline.push((await once({})).seconds);
      defaultCpu.push(cpuPerRow[at]);
      const mark = cpuPerRow.length;
      oneThread.push((await once({ threads: 1 })).seconds);
      oneThreadCpu.push(cpuPerRow[mark]);
      storedOnly.push((await once({ baseline: null })).seconds);
    }
    const last = await once({});
    console.error(`policy-replay: changed ${last.report.changed} (${last.report.transitions.filter((t) => t.from !== t.to).map((t) => `${t.from} -> ${t.to}: ${t.count}`).join(', ')}), drift ${last.report.drift}`);
    const s = median(withBaseline);
    const round = (x, d = 2) => Math.round(x * 10 ** d) / 10 ** d;
    const store = {};
    if (await postgresReachable()) {
      await withDatabase(async (url) => {
        const { openPostgresStorage } = await import('../dist/ledger/postgres.js');
        const w0 = performance.now();
        await writeLedger(await openPostgresStorage(url), active);
        console.error(`policy-replay: wrote ${ROWS} rows to PostgreSQL in ${((performance.now() - w0) / 1000).toFixed(1)} s`);
        const { dbPath: _lmdb, ...common } = job;
        const times = [];
        const cpu = [];
        let report = null;
        for (let r = 0; r < RUNS; r++) {
          const started = performance.now();
          const used = process.cpuUsage();
          report = await runStoreReplay({ ...common, databaseUrl: url });
          const u = process.cpuUsage(used);
          times.push((performance.now() - started) / 1000);
          cpu.push((u.user + u.system) / ROWS);
          if (report.rows.scanned !== ROWS) throw new Error(`central-store replay scanned ${report.rows.scanned} rows, expected ${ROWS}`);
        }
        // The same rows decided by the same code: the two stores must report the same transitions.
        if (JSON.stringify(report.transitions) !== JSON.stringify(last.report.transitions)) throw new Error('the central-store replay reports other transitions than the LMDB one');
        store['policy replay rows/s, PostgreSQL'] = Math.round(ROWS / median(times));
        store[`policy replay ${ROWS / 1000}k rows s, PostgreSQL`] = round(median(times));
        store['policy replay cpu us/row, PostgreSQL'] = round(median(cpu), 1);
      });
    }
    return {
      'policy replay rows/s': Math.round(ROWS / s),
      [`policy replay ${ROWS / 1000}k rows s`]: round(s),
      'policy replay rows/s, 1 thread': Math.round(ROWS / median(oneThread)),
      // CPU time is what a busy shared machine distorts least: rows/s on an idle core is about 1e6 / this.
      'policy replay cpu us/row, 1 thread': round(median(oneThreadCpu), 1),
      // process.cpuUsage() counts every thread: the workers' start-up and chunk seams show up here.
      'policy replay cpu us/row, default threads': round(median(defaultCpu), 1),
      'policy replay rows/s, no baseline': Math.round(ROWS / median(storedOnly)),
      ...store,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const result = await run();
  for (const [k, v] of Object.entries(result)) console.log(`${k}: ${v}`);
}
