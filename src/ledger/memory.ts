import type { AuditListQuery, AuditRow, AuditRowWithPayload, ChainVerifyResponse } from '../contracts/audit.js';
import { addExecution, copyStats, countsAsActivity, countsAsExecution, emptyStats, touch } from './agent-stats.js';
import { collectRows, listOwn, ownBelow, type ListPlan } from './audit-query.js';
import { verifyChain } from './chain.js';
import { LedgerConflictError, LedgerIntegrityError, LedgerUnavailableError } from './errors.js';
import { checkKvKey } from './kv-key.js';
import { assertPayloadKey } from './payload-cipher.js';
import type { AgentStats, AppendEntry, KvStore, Ledger, ListedRow, ListPage, Storage, StorageOptions, StoredRow } from './port.js';
import { RowBuilder, validateEntry } from './row-builder.js';
import { checkSourceId, defaultSourceId } from './source-id.js';
import { eraseRow, readRowWithPayload } from './row-reader.js';
import { MemoryReplicaStore } from './memory-replicas.js';

/**
 * The ledger for `:memory:`: the same row bytes, chain, queries and errors as the LMDB adapter, kept
 * in process memory and gone at exit. A row is "committed" as soon as append() returns.
 */
class MemoryLedger implements Ledger {
  private readonly builder: RowBuilder;
  /** rows[seq - 1] is the stored value of seq. */
  private readonly rows: Buffer[] = [];
  private readonly envelopes = new Map<string, number>();
  private readonly postChecks = new Map<string, string>();
  private readonly stats = new Map<string, AgentStats>();
  private closed = false;

  constructor(
    private readonly payloadKey: Buffer | undefined,
    source: string,
  ) {
    this.builder = new RowBuilder({ seq: 0, hash: null }, payloadKey, source);
  }

  async head(): Promise<{ seq: number; hash: string | null }> {
    return this.builder.head();
  }

  append(entry: AppendEntry): Promise<AuditRow> {
    if (this.closed) return Promise.reject(new LedgerUnavailableError('ledger is closed'));
    try {
      validateEntry(entry);
      const id = entry.envelope_id;
      if (this.envelopes.has(id)) {
        throw new LedgerConflictError('duplicate_envelope_id', `envelope ${id} is already in the ledger`, id);
      }
      const parent = entry.phase === 'post_check' ? entry.parent_envelope_id : null;
      if (parent !== null) {
        const existing = this.postChecks.get(parent);
        if (existing !== undefined) {
          throw new LedgerConflictError('post_check_exists', `pre-check ${parent} already has post-check ${existing}`, existing);
        }
      }
      const built = this.builder.build(entry, true);
      this.rows.push(built.bytes);
      this.envelopes.set(entry.envelope_id, built.seq);
      if (parent !== null) this.postChecks.set(parent, entry.envelope_id);
      if (countsAsActivity(entry.phase)) {
        let s = this.stats.get(entry.agent_id);
        if (!s) this.stats.set(entry.agent_id, (s = emptyStats()));
        if (countsAsExecution(entry.phase)) addExecution(s, entry.decision);
        touch(s, entry.timestamp);
      }
      return Promise.resolve(built.row);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  async get(envelopeId: string): Promise<AuditRowWithPayload | null> {
    const seq = this.envelopes.get(envelopeId);
    if (seq === undefined) return null;
    const bytes = this.rows[seq - 1];
    if (!bytes) throw new LedgerIntegrityError(`envelope ${envelopeId} is indexed at seq ${seq}, which is missing`, seq);
    return readRowWithPayload(bytes, this.payloadKey, seq);
  }

  list(query: AuditListQuery): Promise<ListPage> {
    return listOwn(this, query);
  }

  async listRows(plan: ListPlan): Promise<ListedRow[]> {
    const rows = this.rows;
    const top = Math.min(ownBelow(plan) - 1, rows.length);
    function* descending(): Generator<readonly [number, Buffer]> {
      for (let seq = top; seq >= 1; seq--) yield [seq, rows[seq - 1]] as const;
    }
    return collectRows(descending(), plan);
  }

  /** The seq of the newest row (MemoryReplicaStore positions arrivals after it). */
  headSeq(): number {
    return this.rows.length;
  }

  async postCheckOf(preCheckEnvelopeId: string): Promise<string | null> {
    return this.postChecks.get(preCheckEnvelopeId) ?? null;
  }

  async agentStats(agentId: string): Promise<AgentStats> {
    const s = this.stats.get(agentId);
    return s ? copyStats(s) : emptyStats();
  }

  async *agents(after?: string): AsyncIterable<[string, AgentStats]> {
    const ids = [...this.stats.keys()].filter((id) => after === undefined || id > after).sort();
    for (const id of ids) yield [id, copyStats(this.stats.get(id)!)];
  }

  async verify(): Promise<ChainVerifyResponse> {
    const rows = this.rows;
    function* stored(): Generator<readonly [number, Buffer]> {
      for (let i = 0; i < rows.length; i++) yield [i + 1, rows[i]] as const;
    }
    return verifyChain(stored(), { payloadKey: this.payloadKey, expectedHead: toExpectedHead(this.builder.head()) });
  }

  async erasePayload(envelopeId: string): Promise<boolean> {
    if (this.closed) throw new LedgerUnavailableError('ledger is closed');
    const seq = this.envelopes.get(envelopeId);
    if (seq === undefined) return false;
    this.rows[seq - 1] = eraseRow(this.rows[seq - 1], seq);
    return true;
  }

  async readRows(afterSeq: number, limit: number): Promise<StoredRow[]> {
    const from = Math.max(0, afterSeq);
    return this.rows.slice(from, from + Math.max(0, limit)).map((bytes, i) => ({ seq: from + i + 1, bytes: Buffer.from(bytes) }));
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

function toExpectedHead(h: { seq: number; hash: string | null }): { seq: number; hash: string } {
  return { seq: h.seq, hash: h.hash ?? '' };
}

/** Values are kept as JSON text, so get() returns a fresh copy exactly as the LMDB adapter does. */
class MemoryKv implements KvStore {
  private readonly namespaces = new Map<string, Map<string, string>>();

  async get<T = unknown>(ns: string, key: string): Promise<T | undefined> {
    const json = this.namespaces.get(ns)?.get(key);
    return json === undefined ? undefined : (JSON.parse(json) as T);
  }

  async put(ns: string, key: string, value: unknown): Promise<void> {
    checkKvKey(ns, key);
    let m = this.namespaces.get(ns);
    if (!m) this.namespaces.set(ns, (m = new Map()));
    if (value === undefined) m.delete(key);
    else m.set(key, JSON.stringify(value));
  }

  async entries<T = unknown>(ns: string): Promise<Array<[string, T]>> {
    const m = this.namespaces.get(ns);
    if (!m) return [];
    const out: Array<[string, T]> = [...m].map(([k, json]) => [k, JSON.parse(json) as T]);
    // LMDB orders keys by their UTF-8 bytes; match it.
    return out.sort((a, b) => Buffer.compare(Buffer.from(a[0]), Buffer.from(b[0])));
  }
}

/** Storage for `:memory:`: nothing persists, so every run starts with an empty audit list. */
export function openMemoryStorage(opts: StorageOptions = {}): Storage {
  if (opts.encryptionKey !== undefined) assertPayloadKey(opts.encryptionKey);
  const ledger = new MemoryLedger(opts.encryptionKey, checkSourceId(opts.source ?? defaultSourceId('ledger')));
  return {
    ledger,
    kv: new MemoryKv(),
    replicas: new MemoryReplicaStore(opts.encryptionKey, () => ledger.headSeq()),
    close: () => ledger.close(),
  };
}
