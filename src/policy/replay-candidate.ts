import { readFile, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { readYamlDir } from './loader.js';
import { compilePolicySet, parsePolicyPack, type PolicySource } from './pack.js';
import type { PolicySet } from './policy-set.js';

/**
 * Where `gov policy replay --version <v>` (and `--baseline <v>`) finds a policy set. One function, so that
 * the stored versions (the policy version store, references such as `default@1.4.0`) plug in here and
 * nowhere else.
 *
 * - a directory: the whole candidate set, every pack in it (as the gateway loads GOV_POLICY_DIR);
 * - a pack file: the active set (`policyDir`) with the pack of the same `pack:` name replaced by this file,
 *   or added when the active set has no such pack: the usual "I edited one pack" case;
 * - a stored reference (`default@1.4.0`: the active set with that version in place; `a@1+b@2#<digest>`:
 *   exactly that set, a decision's own policy_version): through `deps.stored`, the policy version store.
 *
 * "The active set" is the version store's when the ledger has one (what the gateway enforces, API
 * activations included), else the packs of `policyDir`.
 */

export class CandidateError extends Error {}

export interface CandidateDeps {
  /** The active packs' directory (GOV_POLICY_DIR or --policies). */
  policyDir: string;
  /**
   * Resolves a stored reference (`name@version`, or whatever the version store accepts) to the sources of
   * the whole set to evaluate (the active packs with that version in place), or null when it is unknown.
   * Sources rather than a compiled set, because replay workers compile their own copy. Absent: stored
   * references are refused with a message saying so.
   */
  stored?: (ref: string) => Promise<PolicySource[] | null>;
  /** The active packs of the ledger's version store, when it has any: they stand for `policyDir`'s. */
  storedActive?: PolicySource[];
}

export interface ResolvedCandidate {
  set: PolicySet;
  /** What `set` was compiled from; compilePolicySet(sources) gives the same set (and version) again. */
  sources: PolicySource[];
  /** How the set was formed, for the report. */
  description: string;
}

/** A reference the version store would hold: a pack name, `@`, a version. */
const STORED_REF = /^[A-Za-z0-9][\w.-]{0,99}@\S{1,2000}$/;

async function kindOf(path: string): Promise<'dir' | 'file' | null> {
  try {
    const s = await stat(path);
    return s.isDirectory() ? 'dir' : s.isFile() ? 'file' : null;
  } catch {
    return null;
  }
}

async function activeSources(policyDir: string): Promise<PolicySource[]> {
  try {
    return await readYamlDir(policyDir);
  } catch (e) {
    throw new CandidateError(`cannot read the active policy directory ${policyDir}: ${(e as Error).message}`);
  }
}

/** Compiles, turning a load error (file, line and reason) into a CandidateError. */
function compile(sources: readonly PolicySource[]): PolicySet {
  try {
    return compilePolicySet(sources);
  } catch (e) {
    throw new CandidateError((e as Error).message);
  }
}

/** The active set: the version store's when it has one, else `policyDir`'s packs, as the gateway loads it. */
export async function activePolicySet(policyDir: string, storedActive?: PolicySource[]): Promise<ResolvedCandidate> {
  if (storedActive !== undefined && storedActive.length > 0) return { set: compile(storedActive), sources: storedActive, description: 'the active set of the version store' };
  const sources = await activeSources(policyDir);
  return { set: compile(sources), sources, description: `active packs in ${policyDir}` };
}

export async function resolveCandidate(ref: string, deps: CandidateDeps): Promise<ResolvedCandidate> {
  const kind = await kindOf(ref);
  if (kind === 'dir') {
    const sources = await activeSources(ref).catch(() => {
      throw new CandidateError(`cannot read policy directory ${ref}`);
    });
    if (sources.length === 0) throw new CandidateError(`no policy packs (*.yaml) in ${ref}`);
    return { set: compile(sources), sources, description: `every pack in ${ref}` };
  }
  if (kind === 'file') {
    const text = await readFile(ref, 'utf8');
    const candidate: PolicySource = { origin: basename(ref), location: ref, text };
    let name: string;
    try {
      name = parsePolicyPack(candidate).pack;
    } catch (e) {
      throw new CandidateError((e as Error).message);
    }
    const fromStore = deps.storedActive !== undefined && deps.storedActive.length > 0;
    const active = fromStore ? deps.storedActive! : await activeSources(deps.policyDir);
    const where = fromStore ? 'the active set of the version store' : deps.policyDir;
    const kept: PolicySource[] = [];
    let replaced: string | null = null;
    for (const src of active) {
      let packName: string | null = null;
      try {
        packName = parsePolicyPack(src).pack;
      } catch {
        // A broken active file is reported by the compile below if it stays in the set.
      }
      if (packName === name) replaced = src.origin;
      else kept.push(src);
    }
    // Two sources may not share an origin: the candidate takes the replaced file's place.
    const origin = replaced ?? candidate.origin;
    const clash = kept.find((s) => s.origin === origin);
    const placed: PolicySource = { ...candidate, origin: clash ? `candidate-${origin}` : origin };
    const sources = [...kept, placed];
    return {
      set: compile(sources),
      sources,
      description: replaced !== null ? `${ref} in place of pack ${name} (${replaced}) in ${where}` : `${ref} added to the packs in ${where}`,
    };
  }
  if (STORED_REF.test(ref)) {
    if (deps.stored === undefined) throw new CandidateError(`${ref}: no such file or directory, and stored policy versions cannot be read here yet (give a pack file or a directory of packs)`);
    const sources = await deps.stored(ref);
    if (sources === null) throw new CandidateError(`${ref}: no such stored policy version`);
    return { set: compile(sources), sources, description: `stored version ${ref}` };
  }
  throw new CandidateError(`${ref}: no such file or directory`);
}
