// `npm run bench` (after `npm run build`): runs each benchmark module in sequence, prints one table and writes
// bench/results/latest.json. Each module exports `default async function run()` returning { figure: value }.
// A module that is missing is skipped; one that throws is reported and the others still run.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';

const MODULES = ['engine.js', 'policy-rules.js', 'output-contract.js', 'detector-quality.js', 'ledger.js', 'http.js', 'client-overhead.js', 'postgres.js', 'replication.js', 'proxy.js', 'proxy-memory.js', 'sidecar-memory.js', 'sidecar-allocations.js', 'durability-levels.js', 'stream-size.js', 'policy-versions.js', 'policy-replay.js'];
const here = (name) => fileURLToPath(new URL(name, import.meta.url));

/** The issue's goals for this 2-core machine, shown beside the figures they apply to. */
const GOALS = {
  'engine p99 ms': '<= 0.5',
  'policy 50 rules p99 ms': '<= 0.2',
  'engine 50 rules p99 ms': '<= 0.5',
  'ledger append rows/s': '>= 100000',
  'chain verify rows/s': '>= 500000',
  'http validate req/s': '>= 5000',
  'http validate p99 ms': '<= 10',
  'http non-2xx': '0',
  // Issue 17: the client wrapper per call, against the embedded gateway in process.
  'client two-phase overhead p50 ms': '<= 1',
  'client single-shot overhead p50 ms': '<= 1',
  'pg ingest rows/s': '>= 20000',
  'pg http validate req/s': '>= 3000',
  'pg http non-2xx': '0',
  'pg+redis http validate req/s': '>= 3000',
  'pg+redis http non-2xx': '0',
  'pg replication ingest rows/s': '>= 20000',
  'replication offered rows/s': '1000',
  'replication lag p99 ms': '<= 1000',
  'replication call failures': '0',
  // Issue 15, at the sidecar's defaults.
  'sidecar peak VmHWM MB': '<= 100',
  'sidecar RssAnon MB under load (max)': '<= 64',
  // The same goals on every corpus; the blind ones (test/fixtures/detectors/README.md) are the honest measure.
  ...Object.fromEntries(
    ['injection', 'independent-injection', 'blind2-injection', 'blind3-injection', 'blind4-injection', 'blind5-injection'].flatMap((c) => [[`corpus ${c} precision`, '>= 0.95'], [`corpus ${c} recall`, '>= 0.85']]),
  ),
  ...Object.fromEntries(
    ['pii-secrets', 'independent-pii-secrets', 'blind2-pii-secrets'].flatMap((c) => [[`corpus ${c} precision`, '>= 0.97'], [`corpus ${c} recall`, '>= 0.95']]),
  ),
};

function fmt(v) {
  if (typeof v === 'number') return Number.isInteger(v) ? v.toLocaleString('en-US') : v.toLocaleString('en-US', { maximumFractionDigits: 3 });
  return typeof v === 'string' ? v : JSON.stringify(v);
}

async function main() {
  const results = {};
  const modules = {};
  for (const name of MODULES) {
    const path = here(name);
    if (!existsSync(path)) {
      console.error(`bench: ${name} not found, skipped`);
      modules[name] = { status: 'missing' };
      continue;
    }
    const started = Date.now();
    console.error(`bench: running ${name} ...`);
    try {
      const mod = await import(pathToFileURL(path).href);
      if (typeof mod.default !== 'function') throw new Error('no default export run()');
      const figures = await mod.default();
      for (const [k, v] of Object.entries(figures ?? {})) results[k] = v;
      modules[name] = { status: 'ok', seconds: Math.round((Date.now() - started) / 100) / 10, figures };
    } catch (e) {
      console.error(`bench: ${name} failed: ${e instanceof Error ? e.stack : String(e)}`);
      modules[name] = { status: 'failed', error: e instanceof Error ? e.message : String(e) };
    }
  }

  const rows = Object.entries(results).map(([k, v]) => [k, fmt(v), GOALS[k] ?? '']);
  const head = ['figure', 'value', 'goal'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells) => cells.map((c, i) => (i === 1 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd();
  console.log(line(head));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
  for (const [name, m] of Object.entries(modules)) if (m.status !== 'ok') console.log(`(${name}: ${m.status}${m.error ? `: ${m.error}` : ''})`);

  const outDir = here('results/');
  mkdirSync(outDir, { recursive: true });
  const report = {
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    cpu_model: cpus()[0]?.model ?? 'unknown',
    results,
    modules,
  };
  writeFileSync(here('results/latest.json'), JSON.stringify(report, null, 2) + '\n');
  console.error('bench: wrote bench/results/latest.json');
  if (Object.values(modules).some((m) => m.status === 'failed')) process.exitCode = 1;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
