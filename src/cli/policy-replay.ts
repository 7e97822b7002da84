import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { SecretFileError, withSecretFiles } from '../config/secret-files.js';
import { parseEncryptionKey } from '../ledger/payload-cipher.js';
import { loadGoldenRules } from '../policy/golden.js';
import { loadManifestDir } from '../policy/manifest-files.js';
import { SKIP_REASONS, type ReplayReport, type Transition } from '../policy/replay.js';
import { activePolicySet, CandidateError, resolveCandidate, type CandidateDeps, type ResolvedCandidate } from '../policy/replay-candidate.js';
import { runReplay, runStoreReplay } from '../policy/replay-run.js';
import { ReplaySourceError } from '../policy/replay-row.js';
import { openLedgerReader } from '../policy/replay-source.js';
import { openStoreReader } from '../policy/replay-source-postgres.js';
import { PolicyLoadError } from '../policy/errors.js';
import { compilePolicySet, type PolicySource } from '../policy/pack.js';
import { activeSources as storedActiveSources, KvPolicyVersionStore, PolicyRefError, resolvePolicySources } from '../policy/version-store.js';

export const POLICY_REPLAY_USAGE = `Usage: gov policy replay --version <v> [--since <time>] [--agent <glob>] [--baseline <v>|none]
                         [--db DIR | --database-url URL] [--policies DIR] [--manifests DIR] [--examples N]
                         [--threads N] [--json]

Re-decides the stored validate, pre_check and post_check rows of the ledger under a candidate policy set and
reports how the decisions would change, before anyone activates it. Reads the ledger read-only (the gateway
or sidecar may keep running); writes nothing. On a central PostgreSQL store it reads the gateways' rows and
every sidecar chain replicated to it, in one read-only snapshot.

  --version <v>    the candidate: a directory of packs (the whole set), or one pack file (the active set
                   with the pack of the same name replaced by it, or added)
  --baseline <v>   what the candidate is also compared with, re-evaluated on the same rows (default: the
                   active packs of --policies); none: compare with the stored outcomes only
  --since <time>   only rows at or after an ISO 8601 time, or a duration back from now (30m, 24h, 7d)
  --agent <glob>   only rows of agents matching the glob (picomatch, e.g. 'billing-*')
  --db DIR         an LMDB ledger (default, when GOV_DATABASE_URL is unset: GOV_DB_PATH, else GOV_EMBED_DB,
                   else .gov/ledger)
  --database-url URL
                   the central PostgreSQL store (default GOV_DATABASE_URL when --db is not given)
  --policies DIR   the active packs (default GOV_POLICY_DIR, else ./policies)
  --manifests DIR  agent manifests and golden rules (default GOV_MANIFEST_DIR, else ./manifests)
  --examples N     example envelopes per changed transition (default 5)
  --threads N      threads in all, 1-4 (default: 1 below 20,000 rows, else one per core, at most 4); LMDB only
  --json           print one JSON object instead of the table

Encrypted payloads are read with GOV_AUDIT_ENCRYPTION_KEY; without it they are counted as undecryptable.
Exit 0 when the replay ran (whatever it found), 2 on a usage, file or ledger error. docs/policies.md, Replay.
`;

class UsageError extends Error {}

const DURATION = /^(\d{1,6})(m|h|d)$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `--since`: an ISO 8601 time with a date, or a duration back from now. */
export function parseSince(text: string, now: Date): Date {
  const d = DURATION.exec(text.trim());
  if (d) return new Date(now.getTime() - Number(d[1]) * UNIT_MS[d[2] as keyof typeof UNIT_MS]);
  if (/^\d{4}-\d{2}-\d{2}/.test(text)) {
    const t = Date.parse(text);
    if (Number.isFinite(t)) return new Date(t);
  }
  throw new UsageError(`--since ${JSON.stringify(text)}: expected an ISO 8601 time (2026-11-24T09:00:00Z) or a duration (30m, 24h, 7d)`);
}

function pad(rows: string[][]): string[] {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd());
}

function transitionTable(title: string, list: readonly Transition[]): string[] {
  if (list.length === 0) return [`${title}: none`];
  const rows = [[title, 'rows'], ...list.map((t) => [`${t.from} -> ${t.to}${t.from === t.to ? '' : '  *'}`, String(t.count)])];
  return pad(rows).map((l) => `  ${l}`);
}

/** The report as the terminal shows it: counts, both transition tables, examples. */
export function formatReplayReport(r: ReplayReport & { threads?: number }, candidate: string, baseline: string | null): string {
  const lines: string[] = [];
  lines.push(`candidate: ${r.candidate_version}  (${candidate})`);
  lines.push(`baseline:  ${r.baseline_version === null ? 'none (stored outcomes only)' : `${r.baseline_version}  (${baseline})`}`);
  const filters = [r.since ? `since ${r.since}` : '', r.agent ? `agent ${r.agent}` : ''].filter(Boolean).join(', ');
  const skipped = SKIP_REASONS.filter((k) => r.rows.skipped[k] > 0).map((k) => `${k} ${r.rows.skipped[k]}`);
  lines.push(`rows: ${r.rows.scanned} scanned, ${r.rows.replayed} replayed${skipped.length ? `, skipped: ${skipped.join(', ')}` : ''}${filters ? ` (${filters})` : ''}`);
  lines.push(`changed: ${r.changed} of ${r.rows.replayed} vs stored${r.changed_vs_baseline === null ? '' : `; ${r.changed_vs_baseline} vs baseline; drift (baseline != stored): ${r.drift}`}`);
  lines.push('');
  lines.push(...transitionTable('stored -> candidate', r.transitions));
  if (r.baseline_version !== null) {
    lines.push('');
    lines.push(...transitionTable('baseline -> candidate', r.baseline_transitions));
  }
  if (r.examples.length > 0) {
    lines.push('');
    lines.push('examples (stored -> candidate):');
    for (const e of r.examples) {
      const rules = [...e.rules_added.map((id) => `+${id}`), ...e.rules_removed.map((id) => `-${id}`)].join(' ');
      lines.push(`  ${e.from} -> ${e.to}  ${e.envelope_id}  ${e.phase} ${e.agent_id} ${e.timestamp}${e.baseline !== null ? `  baseline ${e.baseline}` : ''}${rules ? `  ${rules}` : ''}`);
    }
  }
  lines.push('');
  lines.push(`${r.rows.scanned} rows in ${(r.elapsed_ms / 1000).toFixed(2)} s (${r.rows_per_second} rows/s${r.threads !== undefined && r.threads > 1 ? `, ${r.threads} threads` : ''})`);
  return `${lines.join('\n')}\n`;
}

export async function policyReplayCommand(argv: string[], rawEnv: NodeJS.ProcessEnv = process.env): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        help: { type: 'boolean', short: 'h' },
        version: { type: 'string' },
        baseline: { type: 'string' },
        since: { type: 'string' },
        agent: { type: 'string' },
        db: { type: 'string' },
        'database-url': { type: 'string' },
        policies: { type: 'string' },
        manifests: { type: 'string' },
        examples: { type: 'string' },
        json: { type: 'boolean' },
        threads: { type: 'string' },
      },
      allowPositionals: false,
    }));
  } catch (e) {
    process.stderr.write(`gov policy replay: ${(e as Error).message}\n${POLICY_REPLAY_USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(POLICY_REPLAY_USAGE);
    return 0;
  }
  try {
    const env = withSecretFiles(rawEnv, ['GOV_DATABASE_URL', 'GOV_AUDIT_ENCRYPTION_KEY']);
    const version = values.version as string | undefined;
    if (!version) throw new UsageError('--version <v> is required (a pack file or a directory of packs)');
    const examples = values.examples === undefined ? 5 : Number(values.examples);
    if (!Number.isInteger(examples) || examples < 0 || examples > 1000) throw new UsageError('--examples must be an integer from 0 to 1000');
    const threads = values.threads === undefined ? undefined : Number(values.threads);
    if (threads !== undefined && (!Number.isInteger(threads) || threads < 1 || threads > 4)) throw new UsageError('--threads must be an integer from 1 to 4');
    const since = values.since === undefined ? null : parseSince(values.since as string, new Date());
    const agent = (values.agent as string | undefined) ?? null;
    if (agent !== null && agent.trim() === '') throw new UsageError('--agent must be a non-empty glob');
    const policyDir = (values.policies as string | undefined) ?? env.GOV_POLICY_DIR ?? 'policies';
    const manifestDir = (values.manifests as string | undefined) ?? env.GOV_MANIFEST_DIR ?? 'manifests';
    const dbFlag = values.db as string | undefined;
    const urlFlag = values['database-url'] as string | undefined;
    if (dbFlag !== undefined && urlFlag !== undefined) throw new UsageError('give --db (an LMDB ledger) or --database-url (the central store), not both');
    if (urlFlag !== undefined && urlFlag.trim() === '') throw new UsageError('--database-url must be a postgres:// URL');
    // As the gateway chooses its store: GOV_DATABASE_URL, when set, is where the history is.
    const databaseUrl = urlFlag ?? (dbFlag === undefined && env.GOV_DATABASE_URL?.trim() ? env.GOV_DATABASE_URL : null);
    if (databaseUrl !== null && threads !== undefined) throw new UsageError('--threads applies to an LMDB ledger; the central store is replayed on one thread as its rows arrive');
    const dbPath = dbFlag ?? env.GOV_DB_PATH ?? env.GOV_EMBED_DB ?? '.gov/ledger';
    if (databaseUrl === null && dbPath === ':memory:') throw new UsageError('the ledger is :memory:, nothing is stored to replay; give --db');
    let key: Buffer | undefined;
    const keyText = env.GOV_AUDIT_ENCRYPTION_KEY;
    if (keyText !== undefined && keyText.trim() !== '') {
      try {
        key = parseEncryptionKey(keyText);
      } catch (e) {
        throw new UsageError(`GOV_AUDIT_ENCRYPTION_KEY: ${(e as Error).message}`);
      }
    }

    // Stored versions and the active set come from the ledger's version store, read in its own snapshot
    // and closed before the replay opens the ledger.
    const reader = databaseUrl !== null ? await openStoreReader(databaseUrl, key) : existsSync(join(dbPath, 'data.mdb')) ? openLedgerReader(dbPath, key) : null;
    let candidate: ResolvedCandidate;
    let baseline: ResolvedCandidate | null;
    const baselineRef = (values.baseline as string | undefined) ?? null;
    try {
      const store = reader === null ? null : new KvPolicyVersionStore(reader.kv());
      const deps: CandidateDeps = {
        policyDir,
        storedActive: store === null ? undefined : await storedActiveSources(store),
        stored: store === null ? undefined : (ref) => storedSources(store, ref),
      };
      candidate = await resolveCandidate(version, deps);
      if (baselineRef === 'none') baseline = null;
      else if (baselineRef !== null) baseline = await resolveCandidate(baselineRef, deps);
      else baseline = await activePolicySet(policyDir, deps.storedActive);
    } finally {
      await reader?.close();
    }

    await loadGoldenRules(manifestDir); // refused here, with its file and reason, rather than in a worker
    const job = {
      encryptionKey: key ?? null,
      candidate: candidate.sources,
      baseline: baseline?.sources ?? null,
      manifestDir,
      manifests: await loadManifestDir(join(manifestDir, 'agents')),
      since: since?.toISOString() ?? null,
      agent,
      examples,
    };
    const report = databaseUrl !== null ? await runStoreReplay({ ...job, databaseUrl }) : await runReplay({ ...job, dbPath, ...(threads !== undefined ? { threads } : {}) });
    if (values.json) {
      process.stdout.write(`${JSON.stringify({ ledger: databaseUrl !== null ? withoutPassword(databaseUrl) : dbPath, candidate: { ref: version, description: candidate.description }, baseline: baseline === null ? null : { ref: baselineRef ?? 'active', description: baseline.description }, ...report })}\n`);
    } else {
      process.stdout.write(formatReplayReport(report, candidate.description, baseline?.description ?? null));
    }
    return 0;
  } catch (e) {
    const known = e instanceof UsageError || e instanceof SecretFileError || e instanceof CandidateError || e instanceof ReplaySourceError || (e as Error).name === 'PolicyLoadError';
    process.stderr.write(`gov policy replay: ${(e as Error).message}\n`);
    return known ? 2 : 1;
  }
}

/** The store's address as a report may print it: a password in the URL is never echoed. */
export function withoutPassword(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return 'postgresql';
  }
}

/** A stored reference's sources, checked as the policy API checks them; null when no such version is stored. */
async function storedSources(store: KvPolicyVersionStore, ref: string): Promise<PolicySource[] | null> {
  try {
    const { sources, digest } = await resolvePolicySources(store, ref);
    if (digest !== null) {
      const version = compilePolicySet(sources).version;
      if (!version.endsWith(`#${digest}`)) throw new CandidateError(`${ref} does not match the stored content of those versions (they compile to ${version})`);
    }
    return sources;
  } catch (e) {
    if (e instanceof PolicyRefError && e.kind === 'not_found') return null;
    if (e instanceof PolicyRefError || e instanceof PolicyLoadError) throw new CandidateError(e.message);
    throw e;
  }
}
