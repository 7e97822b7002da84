import { canonicalJson } from '../ledger/canonical.js';

export interface FieldChange {
  field: string;
  /** null where the field is absent on that side. */
  from: unknown;
  to: unknown;
}

export interface PackDiff {
  /** Pack-level fields (version, description, applies_to, ...) that differ; `rules` is diffed below. */
  pack: FieldChange[];
  rules: {
    added: Array<Record<string, unknown>>;
    removed: Array<Record<string, unknown>>;
    changed: Array<{ id: string; changes: FieldChange[] }>;
  };
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);
const same = (a: unknown, b: unknown) => canonicalJson(a ?? null) === canonicalJson(b ?? null);

function fieldChanges(a: Obj, b: Obj, skip: ReadonlySet<string> = new Set()): FieldChange[] {
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((k) => !skip.has(k)).sort();
  const out: FieldChange[] = [];
  for (const k of keys) if (!same(a[k], b[k])) out.push({ field: k, from: a[k] ?? null, to: b[k] ?? null });
  return out;
}

/**
 * Rule-level difference of two versions of a pack, on their parsed content (so layout and comments never
 * count): rules matched by `id`; a changed rule lists each top-level field that differs (a `when` condition
 * is one field, shown whole on both sides). Rules keep their order of the newer version.
 */
export function diffPacks(from: unknown, to: unknown): PackDiff {
  const a = isObj(from) ? from : {};
  const b = isObj(to) ? to : {};
  const rulesOf = (p: Obj) => (Array.isArray(p.rules) ? p.rules.filter(isObj) : []);
  const before = new Map(rulesOf(a).map((r) => [String(r.id), r]));
  const after = new Map(rulesOf(b).map((r) => [String(r.id), r]));
  const added: Obj[] = [];
  const changed: Array<{ id: string; changes: FieldChange[] }> = [];
  for (const [id, r] of after) {
    const old = before.get(id);
    if (old === undefined) added.push(r);
    else {
      const changes = fieldChanges(old, r);
      if (changes.length > 0) changed.push({ id, changes });
    }
  }
  const removed = [...before].filter(([id]) => !after.has(id)).map(([, r]) => r);
  return { pack: fieldChanges(a, b, new Set(['rules'])), rules: { added, removed, changed } };
}
