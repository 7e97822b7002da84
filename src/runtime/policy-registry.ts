import { createHash } from 'node:crypto';
import { newEnvelopeId } from '../ledger/envelope-id.js';
import type { Ledger } from '../ledger/port.js';
import { PolicyLoadError, type PolicyProblem } from '../policy/errors.js';
import { compilePolicySet, packRef, parsePackSource, type ParsedPack, type PolicySource } from '../policy/pack.js';
import { diffPacks, type PackDiff } from '../policy/pack-diff.js';
import { emptyPolicySet, type PolicySet } from '../policy/policy-set.js';
import { parseLocated } from '../policy/source-location.js';
import {
  PolicyRefError,
  resolvePolicySet,
  sourceOfVersion,
  sourcesOf,
  type ActivationEvent,
  type ActivePointer,
  type PolicyActor,
  type PolicyVersionStore,
  type StoredPackVersion,
} from '../policy/version-store.js';

/** The agent_id of the ledger rows that record policy changes (phase `policy`). */
export const POLICY_AGENT_ID = 'gov:policy';

/** Versions are keys and parts of policy_version: no `@`, `#` or spaces (semver with build metadata fits). */
const VERSION_TEXT = /^[\w.+-]{1,64}$/;

/** Which pack versions make a set, in a comparable form (published versions are immutable, so this names its content). */
function packKey(packs: ReadonlyArray<{ name: string; version: string }>): string {
  return packs.map((p) => packRef(p.name, p.version)).sort().join('+');
}

/** A change the store refuses as it stands (409): an immutable version with other content, a clash between packs. */
export class PolicyConflictError extends Error {
  constructor(
    message: string,
    readonly problems: readonly PolicyProblem[] = [],
  ) {
    super(message);
    this.name = 'PolicyConflictError';
  }
}

export interface PolicyRegistryDeps {
  store: PolicyVersionStore;
  ledger: Ledger;
  clock: () => Date;
  /** score_version written on policy rows (the scoring config in force). */
  scoreVersion: string;
  /** Called after every change of the active set (metrics, logs). */
  onActiveChange?: (set: PolicySet) => void;
}

export interface PublishResult {
  version: StoredPackVersion;
  /** false: this exact content was already published under this name@version (idempotent). */
  created: boolean;
}

export interface ActivateResult {
  name: string;
  version: string | null;
  previous_version: string | null;
  /** The active set after the change (decision.policy_version from now on). */
  policy_version: string;
  changed: boolean;
  rollback: boolean;
}

/** What one pass over the policy files did; `errors` name the files left as they were. */
export interface FileSyncReport {
  published: string[];
  activated: string[];
  /** Packs whose active version was set through the API and that a file did not override. */
  kept: string[];
  errors: PolicyLoadError[];
  policy_version: string;
}

interface CheckedFile {
  source: PolicySource;
  parsed: ParsedPack;
  rules: number;
}

/**
 * Published pack versions, which one of each pack is active, and the compiled active set the governor
 * reads on every call. Every change is serialised (one at a time, so the immutability check and the write
 * are one step), appended to the ledger as a `policy` row and committed before it takes effect or is
 * answered. Files and the API meet here; the rules are in docs/policies.md ("Files and the API").
 */
/**
 * Compiling a set costs ~20 ms for the default pack (its detectors and regexes), every time a dry run names a
 * version; a tester iterating on one candidate names the same few sets again and again. Sets are kept by
 * their content (a published name@version never changes, and the key is the sources themselves, so a set
 * whose active part moved on is another key), least recently used out first.
 */
const COMPILED_SETS_KEPT = 16;

export class CompiledSetCache {
  private readonly sets = new Map<string, PolicySet>();
  hits = 0;
  misses = 0;

  constructor(private readonly capacity: number) {}

  get(sources: PolicySource[]): PolicySet {
    const h = createHash('sha256');
    for (const s of sources) h.update(`${s.origin}\u0000${s.format ?? 'yaml'}\u0000${s.text.length}\u0000`).update(s.text);
    const key = h.digest('hex');
    const kept = this.sets.get(key);
    if (kept !== undefined) {
      this.hits++;
      this.sets.delete(key);
      this.sets.set(key, kept);
      return kept;
    }
    this.misses++;
    const set = compilePolicySet(sources);
    this.sets.set(key, set);
    if (this.sets.size > this.capacity) this.sets.delete(this.sets.keys().next().value as string);
    return set;
  }

  get size(): number {
    return this.sets.size;
  }
}

export class PolicyRegistry {
  private active: PolicySet = emptyPolicySet();
  private queue: Promise<unknown> = Promise.resolve();
  /** Sets named by dry runs (`policy_version` on POST /v1/policy/evaluate), compiled once each. */
  readonly compiledSets = new CompiledSetCache(COMPILED_SETS_KEPT);

  constructor(private readonly d: PolicyRegistryDeps) {}

  /** The active set: read per decision, so an activation applies from the next call on. */
  current(): PolicySet {
    return this.active;
  }

  get store(): PolicyVersionStore {
    return this.d.store;
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Parses and compiles one pack on its own: its own problems, with line and column. */
  private check(source: PolicySource): CheckedFile {
    const parsed = parsePackSource(source);
    const where = source.location ?? source.origin;
    if (!VERSION_TEXT.test(parsed.spec.version)) {
      throw new PolicyLoadError(where, [parsed.doc.problem(['version'], 'a published version is letters, digits and _ . + - (at most 64), e.g. 1.4.0')]);
    }
    const set = compilePolicySet([source]);
    return { source, parsed, rules: set.rules.length };
  }

  private async record(payload: Record<string, unknown>, policyVersion: string, at: string): Promise<void> {
    await this.d.ledger.append({
      envelope_id: newEnvelopeId(),
      phase: 'policy',
      agent_id: POLICY_AGENT_ID,
      decision: 'approve',
      risk_tier: 'low',
      confidence: null,
      timestamp: at,
      parent_envelope_id: null,
      policy_version: policyVersion,
      score_version: this.d.scoreVersion,
      payload,
    });
  }

  private actorPayload(by: PolicyActor): Record<string, string> {
    return by.kind === 'api' ? { by: 'api', subject: by.subject, tier: by.tier } : { by: 'file', file: by.file };
  }

  private async publishChecked(f: CheckedFile, by: PolicyActor): Promise<PublishResult> {
    const { spec, digest } = f.parsed;
    const ref = packRef(spec.pack, spec.version);
    const existing = await this.d.store.getVersion(spec.pack, spec.version);
    if (existing !== null) {
      if (existing.digest === digest) return { version: existing, created: false };
      throw new PolicyConflictError(`${ref} is already published with other content (digest ${existing.digest.slice(0, 12)}, this one ${digest.slice(0, 12)}); published versions are immutable: publish it under a new version`, [
        f.parsed.doc.problem(['version'], `${ref} is already published with other content; published versions are immutable`),
      ]);
    }
    const seq = (await this.d.store.versions(spec.pack)).length + 1;
    const now = this.d.clock().toISOString();
    const record: StoredPackVersion = {
      name: spec.pack,
      version: spec.version,
      format: f.source.format ?? 'yaml',
      text: f.source.text,
      digest,
      rules: f.rules,
      description: spec.description ?? null,
      published_at: now,
      published_by: by,
      seq,
    };
    // The row first: a version the store holds is never missing from the audit trail.
    await this.record({ action: 'publish', pack: spec.pack, version: spec.version, digest, format: record.format, rules: f.rules, ...this.actorPayload(by) }, this.active.version, now);
    await this.d.store.putVersion(record);
    return { version: record, created: true };
  }

  /** Publishes one pack version (not activated). PolicyLoadError: invalid (422); PolicyConflictError: immutable clash (409). */
  publish(source: PolicySource, by: PolicyActor): Promise<PublishResult> {
    return this.serial(async () => this.publishChecked(this.check(source), by));
  }

  /**
   * Points packs at versions (null: deactivate) and swaps the active set, after compiling it: a set whose
   * packs clash (one rule id in two packs) is refused and nothing changes.
   */
  private async applyPointers(changes: Array<{ name: string; version: string | null }>, by: PolicyActor, setBy: 'file' | 'api'): Promise<ActivateResult[]> {
    const pointers = new Map((await this.d.store.activePointers()).map((p) => [p.name, p]));
    const next = new Map<string, string | null>([...pointers].map(([n, p]) => [n, p.version]));
    for (const c of changes) next.set(c.name, c.version);
    const sources: PolicySource[] = [];
    for (const [name, version] of next) if (version !== null) sources.push(await sourcesOf(this.d.store, name, version));
    let set: PolicySet;
    try {
      set = compilePolicySet(sources);
    } catch (e) {
      if (e instanceof PolicyLoadError) throw new PolicyConflictError(`the packs would clash if activated together: ${e.message}`, e.located);
      throw e;
    }
    const results: ActivateResult[] = [];
    let now: string | null = null;
    for (const c of changes) {
      const before = pointers.get(c.name);
      const previous = before?.version ?? null;
      const changed = previous !== c.version || before?.set_by !== setBy;
      let rollback = false;
      if (c.version !== null && previous !== null && previous !== c.version) {
        const [to, from] = await Promise.all([this.d.store.getVersion(c.name, c.version), this.d.store.getVersion(c.name, previous)]);
        rollback = to !== null && from !== null && to.seq < from.seq;
      }
      results.push({ name: c.name, version: c.version, previous_version: previous, policy_version: set.version, changed, rollback });
      if (!changed) continue;
      const action = c.version === null ? 'deactivate' : 'activate';
      now ??= this.d.clock().toISOString();
      await this.record({ action, pack: c.name, version: c.version, previous_version: previous, rollback, policy_set: set.version, set_by: setBy, ...this.actorPayload(by) }, set.version, now);
      const pointer: ActivePointer = { name: c.name, version: c.version, set_by: setBy, at: now, by };
      await this.d.store.setActive(pointer);
      const seq = (await this.d.store.activations(c.name)).length + 1;
      const event: ActivationEvent = { name: c.name, action, version: c.version, previous_version: previous, at: now, by, seq };
      await this.d.store.addActivation(event);
    }
    if (set.version !== this.active.version) {
      this.active = set;
      this.d.onActiveChange?.(set);
    }
    return results;
  }

  /** Activates a published version, an earlier one (rollback) or, with null, deactivates the pack. */
  activate(name: string, version: string | null, by: PolicyActor): Promise<ActivateResult> {
    return this.serial(async () => {
      if (version !== null && (await this.d.store.getVersion(name, version)) === null) throw new PolicyRefError('not_found', `no published version ${packRef(name, version)}`);
      if (version === null && !(await this.d.store.activePointers()).some((p) => p.name === name)) throw new PolicyRefError('not_found', `no pack ${name} has been activated`);
      const [r] = await this.applyPointers([{ name, version }], by, 'api');
      return r!;
    });
  }

  /**
   * Moves several packs at once (null: deactivate): the set they make together is compiled once and swapped in
   * whole, so packs that only fit together never clash halfway. Every name must be published at that version
   * (or, for null, be active); otherwise nothing changes.
   */
  activateSet(changes: Array<{ name: string; version: string | null }>, by: PolicyActor): Promise<ActivateResult[]> {
    return this.serial(async () => {
      const active = new Set((await this.d.store.activePointers()).filter((p) => p.version !== null).map((p) => p.name));
      for (const c of changes) {
        if (c.version !== null && (await this.d.store.getVersion(c.name, c.version)) === null) throw new PolicyRefError('not_found', `no published version ${packRef(c.name, c.version)}`);
        if (c.version === null && !active.has(c.name)) throw new PolicyRefError('not_found', `pack ${c.name} is not active`);
      }
      return this.applyPointers(changes, by, 'api');
    });
  }

  /**
   * Brings the active set up to the store's pointers, which another replica on the same store may have
   * moved (activate, roll back, deactivate, a policy file it loaded). The core runs it with the kill switch's
   * refresh every GOV_STATE_REFRESH_MS (docs/deployment.md, "Shared state"). It runs in the serial queue, so
   * it never overlaps this replica's own changes and cannot undo one with a read taken before it. Costs one
   * read of the pointers when nothing changed; recompiles only when they did. Resolves true on a change; a
   * store or compile error rejects and the set in force stays.
   */
  refresh(): Promise<boolean> {
    return this.serial(async () => {
      const pointers = await this.d.store.activePointers();
      const stored = packKey(pointers.flatMap((p) => (p.version === null ? [] : [{ name: p.name, version: p.version }])));
      if (stored === packKey(this.active.packs)) return false;
      const set = await resolvePolicySet(this.d.store, 'active');
      if (set.version === this.active.version) return false;
      this.active = set;
      this.d.onActiveChange?.(set);
      return true;
    });
  }

  /** Compiles the active set from the store (at start, before the files are read). */
  async loadActive(): Promise<PolicySet> {
    return this.serial(async () => {
      this.active = await resolvePolicySet(this.d.store, 'active');
      this.d.onActiveChange?.(this.active);
      return this.active;
    });
  }

  /**
   * Brings the policy files into the store (docs/policies.md, "Files and the API"): each file's version is
   * published if absent; a file whose name@version is stored with other content is refused; a file's
   * version becomes active when it is new to the store or when no API activation has taken over its pack.
   * With `strict` (start-up) any problem throws; otherwise bad files are reported and their packs keep
   * their last good version.
   */
  syncFiles(sources: readonly PolicySource[], strict: boolean): Promise<FileSyncReport> {
    return this.serial(async () => {
      const errors: PolicyLoadError[] = [];
      const good: CheckedFile[] = [];
      const names = new Map<string, string>();
      for (const source of [...sources].sort((a, b) => (a.origin < b.origin ? -1 : 1))) {
        const where = source.location ?? source.origin;
        try {
          const f = this.check(source);
          const other = names.get(f.parsed.spec.pack);
          if (other !== undefined) throw new PolicyLoadError(where, [f.parsed.doc.problem(['pack'], `"${f.parsed.spec.pack}" is also defined in ${other}`)]);
          const stored = await this.d.store.getVersion(f.parsed.spec.pack, f.parsed.spec.version);
          if (stored !== null && stored.digest !== f.parsed.digest) {
            throw new PolicyLoadError(where, [f.parsed.doc.problem(['version'], `${packRef(f.parsed.spec.pack, f.parsed.spec.version)} is already published with other content; published versions are immutable: give the changed pack a new version`)]);
          }
          names.set(f.parsed.spec.pack, where);
          good.push(f);
        } catch (e) {
          if (!(e instanceof PolicyLoadError)) throw e;
          if (strict) throw e;
          errors.push(e);
        }
      }
      const published: string[] = [];
      const kept: string[] = [];
      const pointers = new Map((await this.d.store.activePointers()).map((p) => [p.name, p]));
      const changes: Array<{ name: string; version: string }> = [];
      const newlyPublished: CheckedFile[] = [];
      for (const f of good) {
        const { pack, version } = f.parsed.spec;
        const isNew = (await this.d.store.getVersion(pack, version)) === null;
        const pointer = pointers.get(pack);
        if (isNew) newlyPublished.push(f);
        if (isNew || pointer === undefined || pointer.set_by === 'file') {
          if (pointer?.version !== version || pointer.set_by !== 'file') changes.push({ name: pack, version });
        } else if (pointer.version !== version) kept.push(packRef(pack, pointer.version ?? 'none'));
      }
      // Check the whole set before anything is written: a clash between files leaves everything as it was.
      if (changes.length > 0) {
        const next = new Map([...pointers].map(([n, p]) => [n, p.version]));
        for (const c of changes) next.set(c.name, c.version);
        const candidate: PolicySource[] = [];
        for (const [name, version] of next) {
          if (version === null) continue;
          const fresh = newlyPublished.find((f) => f.parsed.spec.pack === name && f.parsed.spec.version === version);
          candidate.push(fresh !== undefined ? fresh.source : await sourcesOf(this.d.store, name, version));
        }
        try {
          compilePolicySet(candidate);
        } catch (e) {
          if (!(e instanceof PolicyLoadError) || strict) throw e;
          errors.push(e);
          return { published, activated: [], kept, errors, policy_version: this.active.version };
        }
      }
      for (const f of newlyPublished) {
        await this.publishChecked(f, { kind: 'file', file: f.source.origin });
        published.push(packRef(f.parsed.spec.pack, f.parsed.spec.version));
      }
      const activated: string[] = [];
      if (changes.length > 0) {
        const byFile = new Map(good.map((f) => [f.parsed.spec.pack, f.source.origin]));
        // One pointer change per pack, each attributed to its file; the set is recompiled once per change.
        for (const c of changes) {
          const [r] = await this.applyPointers([c], { kind: 'file', file: byFile.get(c.name) ?? c.name }, 'file');
          if (r?.changed) activated.push(packRef(c.name, c.version));
        }
      }
      return { published, activated, kept, errors, policy_version: this.active.version };
    });
  }

  async listPacks(): Promise<Array<{ name: string; active: ActivePointer | null; versions: StoredPackVersion[] }>> {
    const pointers = new Map((await this.d.store.activePointers()).map((p) => [p.name, p]));
    const out = [];
    for (const name of await this.d.store.packNames()) out.push({ name, active: pointers.get(name) ?? null, versions: await this.d.store.versions(name) });
    return out;
  }

  async history(name: string): Promise<{ versions: StoredPackVersion[]; active: ActivePointer | null; activations: ActivationEvent[] }> {
    const versions = await this.d.store.versions(name);
    if (versions.length === 0) throw new PolicyRefError('not_found', `no pack named ${name} has been published`);
    const active = (await this.d.store.activePointers()).find((p) => p.name === name) ?? null;
    return { versions, active, activations: await this.d.store.activations(name) };
  }

  async getVersion(name: string, version: string): Promise<StoredPackVersion> {
    const v = await this.d.store.getVersion(name, version);
    if (v === null) throw new PolicyRefError('not_found', `no published version ${packRef(name, version)}`);
    return v;
  }

  async diff(name: string, from: string, to: string): Promise<PackDiff> {
    const [a, b] = await Promise.all([this.getVersion(name, from), this.getVersion(name, to)]);
    const value = (v: StoredPackVersion) => parseLocated(sourceOfVersion(v).text, v.format).value;
    return diffPacks(value(a), value(b));
  }

  /** The set a reference names (version-store.ts resolvePolicySet); `active` is the compiled set in memory. */
  async resolve(ref: string): Promise<PolicySet> {
    if (ref === '' || ref === 'active' || ref === this.active.version) return this.active;
    return resolvePolicySet(this.d.store, ref, (sources) => this.compiledSets.get(sources));
  }
}
