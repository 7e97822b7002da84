import type { KvStore } from '../ledger/port.js';
import { compilePolicySet, packRef, type PolicySource } from './pack.js';
import type { PolicySet } from './policy-set.js';
import type { SourceFormat } from './source-location.js';

/** Who published or activated: an API caller (its key id or token subject and tier, never the token) or a file. */
export type PolicyActor = { kind: 'api'; subject: string; tier: string } | { kind: 'file'; file: string };

/** One published pack version: immutable once stored. */
export interface StoredPackVersion {
  name: string;
  version: string;
  format: SourceFormat;
  /** The source as published (YAML or JSON text). */
  text: string;
  /** SHA-256 (hex) of the parsed content (pack.ts packDigest): equal digests are the same pack. */
  digest: string;
  rules: number;
  description: string | null;
  published_at: string;
  published_by: PolicyActor;
  /** 1, 2, 3... per pack name, in publishing order. */
  seq: number;
}

/**
 * Which version of a pack is active. `version: null`: the pack was deactivated. `set_by` says whether a
 * policy file or the API set it, which decides what a file may change at the next load (docs/policies.md,
 * "Files and the API").
 */
export interface ActivePointer {
  name: string;
  version: string | null;
  set_by: 'file' | 'api';
  at: string;
  by: PolicyActor;
}

/** One change of a pack's active pointer, kept for its history (the ledger has the same as rows). */
export interface ActivationEvent {
  name: string;
  action: 'activate' | 'deactivate';
  version: string | null;
  previous_version: string | null;
  at: string;
  by: PolicyActor;
  seq: number;
}

/**
 * The policy version store port. Adapter here: any KvStore (LMDB or memory, beside the ledger); the fleet
 * issue adds PostgreSQL behind the same interface, hence the promises. It stores and reads; the rules
 * (immutability, who may activate what) live in runtime/policy-registry.ts, which serialises writes.
 */
export interface PolicyVersionStore {
  getVersion(name: string, version: string): Promise<StoredPackVersion | null>;
  /** A pack's versions, oldest first. */
  versions(name: string): Promise<StoredPackVersion[]>;
  packNames(): Promise<string[]>;
  putVersion(v: StoredPackVersion): Promise<void>;
  activePointers(): Promise<ActivePointer[]>;
  setActive(p: ActivePointer): Promise<void>;
  /** A pack's activation history, oldest first. */
  activations(name: string): Promise<ActivationEvent[]>;
  addActivation(e: ActivationEvent): Promise<void>;
}

const NS_VERSIONS = 'policy_versions';
const NS_ACTIVE = 'policy_active';
const NS_ACTIVATIONS = 'policy_activations';

/** Pack names cannot hold `@` (pack.ts Name), so `name@` is an exact prefix of that pack's keys. */
const seqKey = (name: string, seq: number) => `${name}@${String(seq).padStart(10, '0')}`;

export class KvPolicyVersionStore implements PolicyVersionStore {
  constructor(private readonly kv: KvStore) {}

  async getVersion(name: string, version: string): Promise<StoredPackVersion | null> {
    return (await this.kv.get<StoredPackVersion>(NS_VERSIONS, packRef(name, version))) ?? null;
  }

  async versions(name: string): Promise<StoredPackVersion[]> {
    return (await this.kv.entries<StoredPackVersion>(NS_VERSIONS))
      .filter(([k]) => k.startsWith(`${name}@`))
      .map(([, v]) => v)
      .sort((a, b) => a.seq - b.seq);
  }

  async packNames(): Promise<string[]> {
    const names = new Set<string>();
    for (const [, v] of await this.kv.entries<StoredPackVersion>(NS_VERSIONS)) names.add(v.name);
    return [...names].sort();
  }

  async putVersion(v: StoredPackVersion): Promise<void> {
    await this.kv.put(NS_VERSIONS, packRef(v.name, v.version), v);
  }

  async activePointers(): Promise<ActivePointer[]> {
    return (await this.kv.entries<ActivePointer>(NS_ACTIVE)).map(([, v]) => v);
  }

  async setActive(p: ActivePointer): Promise<void> {
    await this.kv.put(NS_ACTIVE, p.name, p);
  }

  async activations(name: string): Promise<ActivationEvent[]> {
    return (await this.kv.entries<ActivationEvent>(NS_ACTIVATIONS))
      .filter(([k]) => k.startsWith(`${name}@`))
      .map(([, v]) => v)
      .sort((a, b) => a.seq - b.seq);
  }

  async addActivation(e: ActivationEvent): Promise<void> {
    await this.kv.put(NS_ACTIVATIONS, seqKey(e.name, e.seq), e);
  }
}

/** A reference that does not name stored versions: `not_found` (404), `digest_mismatch` (409), `malformed` (422). */
export class PolicyRefError extends Error {
  constructor(
    readonly kind: 'not_found' | 'digest_mismatch' | 'malformed',
    message: string,
  ) {
    super(message);
    this.name = 'PolicyRefError';
  }
}

export interface PolicyRef {
  packs: Array<{ name: string; version: string }>;
  /** The 10 hex digits after `#`, when the reference names an exact set. */
  digest: string | null;
}

const PACK_REF = /^([A-Za-z0-9][\w.-]{0,99})@([\w.+-]{1,64})$/;

/**
 * Reads `default@1.4.0`, `a@1.0.0+b@2.1.0` or a whole decision.policy_version `a@1.0.0+b@2.1.0#0123456789`.
 * Versions may carry semver build metadata (`1.0.0+build.5`): a `+` starts a new pack only where `name@` follows.
 */
export function parsePolicyRef(ref: string): PolicyRef {
  const hashAt = ref.indexOf('#');
  const body = hashAt === -1 ? ref : ref.slice(0, hashAt);
  const digest = hashAt === -1 ? null : ref.slice(hashAt + 1);
  if (digest !== null && !/^[0-9a-f]{10}$/.test(digest)) throw new PolicyRefError('malformed', `"${ref}": the part after # must be 10 hex digits`);
  const parts = body.split(/\+(?=[A-Za-z0-9][\w.-]*@)/);
  const packs = parts.map((p) => {
    const m = PACK_REF.exec(p);
    if (m === null) throw new PolicyRefError('malformed', `"${ref}": expected name@version, name@version+name@version..., optionally #digest`);
    return { name: m[1]!, version: m[2]! };
  });
  if (new Set(packs.map((p) => p.name)).size !== packs.length) throw new PolicyRefError('malformed', `"${ref}" names a pack twice`);
  return { packs, digest };
}

/** The stored source of one pack version, ready for compilePolicySet. */
export async function sourcesOf(store: PolicyVersionStore, name: string, version: string): Promise<PolicySource> {
  const v = await store.getVersion(name, version);
  if (v === null) throw new PolicyRefError('not_found', `no published version ${packRef(name, version)}`);
  return sourceOfVersion(v);
}

export function sourceOfVersion(v: StoredPackVersion): PolicySource {
  return { origin: packRef(v.name, v.version), text: v.text, format: v.format };
}

/** The versions active now, as sources (deactivated packs are left out). */
export async function activeSources(store: PolicyVersionStore): Promise<PolicySource[]> {
  const out: PolicySource[] = [];
  for (const p of await store.activePointers()) if (p.version !== null) out.push(await sourcesOf(store, p.name, p.version));
  return out;
}

/**
 * Compiles the policy set a reference names, from the store (for dry runs and `gov policy replay`):
 * - `active` (or an empty string): the set active now;
 * - with `#digest` (a decision's policy_version): exactly the packs named, and their digest must match, so a
 *   past decision is re-evaluated under exactly the rules that made it;
 * - without: the active set with each named pack replaced by (or joined by) the version named, so
 *   `default@1.4.0` means "what would change if default@1.4.0 were activated".
 * Throws PolicyRefError (unknown version, digest mismatch, malformed) or PolicyLoadError (the packs clash).
 */
export async function resolvePolicySet(store: PolicyVersionStore, ref: string, compile: (sources: PolicySource[]) => PolicySet = compilePolicySet): Promise<PolicySet> {
  const { sources, digest } = await resolvePolicySources(store, ref);
  const set = compile(sources);
  if (digest !== null && !set.version.endsWith(`#${digest}`)) {
    throw new PolicyRefError('digest_mismatch', `"${ref}" does not match the stored content of those versions (they compile to ${set.version})`);
  }
  return set;
}

/**
 * The sources behind a reference, as resolvePolicySet reads it, uncompiled (replay workers compile their own
 * copy), and the digest the compiled set must end with, when the reference names an exact set.
 */
export async function resolvePolicySources(store: PolicyVersionStore, ref: string): Promise<{ sources: PolicySource[]; digest: string | null }> {
  if (ref === '' || ref === 'active') return { sources: await activeSources(store), digest: null };
  if (ref === 'none') return { sources: [], digest: null };
  const parsed = parsePolicyRef(ref);
  const byName = new Map<string, PolicySource>();
  if (parsed.digest === null) {
    for (const p of await store.activePointers()) if (p.version !== null) byName.set(p.name, await sourcesOf(store, p.name, p.version));
  }
  for (const p of parsed.packs) byName.set(p.name, await sourcesOf(store, p.name, p.version));
  return { sources: [...byName.values()], digest: parsed.digest };
}
