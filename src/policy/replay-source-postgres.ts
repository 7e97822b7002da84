import type pg from 'pg';
import type { Manifest } from '../contracts/manifest.js';
import type { KvStore } from '../ledger/port.js';
import { keyFingerprint } from '../ledger/payload-cipher.js';
import type { ReplayRow } from './replay.js';
import { replayRow, ReplaySourceError } from './replay-row.js';

/**
 * The stored rows of a central PostgreSQL store, read for `gov policy replay` without ever writing: the
 * gateway's own source chains (gov_audit_rows) and every sidecar chain replicated to it (gov_replica_rows).
 * Everything is read on one connection inside one `REPEATABLE READ READ ONLY` transaction, so the replay sees
 * one snapshot of the whole fleet's history while gateway replicas keep appending and ingesting, and the
 * server refuses any write the reader might attempt. The replay core is synchronous; rows arrive in batches
 * fetched by key (never OFFSET), and the pre-checks a batch's post-checks need from outside it are fetched
 * with it, in one statement, so the core's lookup stays synchronous too.
 */

export interface StoreBatch {
  rows: ReplayRow[];
  /**
   * The pre-check a post-check of this batch points to, by envelope id: from the batch itself (a pre-check the
   * core did not hold, because --since or --agent filtered it out) or fetched from outside it.
   */
  lookup(envelopeId: string): ReplayRow | null;
}

export interface StoreReader {
  /** Gateway rows in arrival order, then each replicated source chain in seq order, `size` rows at a time. */
  batches(size: number): AsyncIterable<StoreBatch>;
  registeredManifests(): Promise<Array<{ agent_id: string; manifest: Manifest }>>;
  /** The store's key-value state as of the snapshot, read-only (the policy version store reads through it). */
  kv(): KvStore;
  close(): Promise<void>;
}

const KV_MANIFESTS = 'manifests';

interface RawRow {
  seq: string;
  row_bytes: Buffer;
}

/** Envelope ids of post-checks whose pre-check is not in `rows`. */
function outsideParents(rows: ReplayRow[]): string[] {
  const inBatch = new Set<string>();
  for (const r of rows) if (r.header.phase === 'pre_check') inBatch.add(r.header.envelope_id);
  const out = new Set<string>();
  for (const r of rows) {
    const p = r.header.parent_envelope_id;
    if (r.header.phase === 'post_check' && p !== null && !inBatch.has(p)) out.add(p);
  }
  return [...out];
}

/**
 * Opens the store at `url` (postgres://…) for reading. `encryptionKey` decrypts encrypted payloads; without
 * one they are reported as undecryptable. A key that is not the store's is an error, as it is for the gateway.
 */
export async function openStoreReader(url: string, encryptionKey?: Buffer): Promise<StoreReader> {
  // Loaded here, not at the top: `gov policy replay` over an LMDB ledger never needs the driver.
  const { default: pgModule } = await import('pg');
  const client: pg.Client = new pgModule.Client({ connectionString: url, application_name: 'gov-policy-replay', connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
  } catch (e) {
    throw new ReplaySourceError(`cannot reach the central store: ${(e as Error).message}`);
  }
  let open = true;
  const close = async () => {
    if (!open) return;
    open = false;
    await client.query('ROLLBACK').catch(() => undefined);
    await client.end().catch(() => undefined);
  };
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    const tables = await client.query<{ name: string }>(`SELECT to_regclass('gov_audit_rows')::text AS name UNION ALL SELECT to_regclass('gov_replica_rows')::text`);
    if (tables.rows[0]?.name == null) throw new ReplaySourceError('the database holds no audit store (no gov_audit_rows table): run `gov migrate` or start a gateway on it first');
    const hasReplicas = tables.rows[1]?.name != null;
    const meta = await client.query<{ value: string }>(`SELECT value FROM gov_meta WHERE key = 'key_fingerprint'`);
    const fingerprint = meta.rows[0]?.value;
    if (encryptionKey !== undefined && fingerprint !== undefined && fingerprint !== keyFingerprint(encryptionKey)) {
      throw new ReplaySourceError('the audit encryption key does not match the key the central store was written with');
    }
    const key = encryptionKey !== undefined && fingerprint !== undefined ? encryptionKey : undefined;
    const toRow = (r: RawRow): ReplayRow => replayRow(r.row_bytes, Number(r.seq), key);
    const lookupFrom = (rows: ReplayRow[], found: RawRow[]) => {
      const byId = new Map<string, ReplayRow>();
      for (const row of rows) if (row.header.phase === 'pre_check') byId.set(row.header.envelope_id, row);
      for (const r of found) {
        const row = toRow(r);
        byId.set(row.header.envelope_id, row);
      }
      return (id: string) => byId.get(id) ?? null;
    };

    const kvGet = async (ns: string, k: string): Promise<string | undefined> =>
      (await client.query<{ value: string }>('SELECT value FROM gov_kv WHERE ns = $1 AND key = $2', [ns, k])).rows[0]?.value;
    const kvEntries = async (ns: string): Promise<Array<[string, string]>> => {
      const res = await client.query<{ key: string; value: string }>('SELECT key, value FROM gov_kv WHERE ns = $1', [ns]);
      // The KvStore port's order: UTF-8 byte order of the keys, whatever the database's collation.
      return res.rows.map((r): [string, string] => [r.key, r.value]).sort((a, b) => Buffer.compare(Buffer.from(a[0]), Buffer.from(b[0])));
    };

    /** A batch of `raw` rows, with the pre-checks its post-checks need that `fetchParents` finds outside it. */
    const batchOf = async (raw: RawRow[], fetchParents: (ids: string[]) => Promise<RawRow[]>): Promise<StoreBatch> => {
      const rows = raw.map(toRow);
      const parents = outsideParents(rows);
      return { rows, lookup: lookupFrom(rows, parents.length === 0 ? [] : await fetchParents(parents)) };
    };

    return {
      async *batches(size) {
        // The gateway's own rows: envelope ids are unique store-wide here, so a parent is found by id alone.
        let afterId = '0';
        for (;;) {
          const res = await client.query<RawRow & { id: string }>('SELECT id, seq, row_bytes FROM gov_audit_rows WHERE id > $1 ORDER BY id LIMIT $2', [afterId, size]);
          if (res.rows.length === 0) break;
          afterId = res.rows[res.rows.length - 1].id;
          yield await batchOf(res.rows, async (ids) => (await client.query<RawRow>('SELECT seq, row_bytes FROM gov_audit_rows WHERE envelope_id = ANY($1)', [ids])).rows);
          if (res.rows.length < size) break;
        }
        if (!hasReplicas) return;
        // Replicated chains: an envelope id is unique within its source only, so a batch never spans two
        // sources and a post-check's pre-check is looked up in its own chain.
        let after: [string, string] = ['', '0'];
        for (;;) {
          const res = await client.query<RawRow & { source: string }>(
            'SELECT source, seq, row_bytes FROM gov_replica_rows WHERE (source, seq) > ($1, $2) ORDER BY source, seq LIMIT $3',
            [after[0], after[1], size],
          );
          if (res.rows.length === 0) break;
          const last = res.rows[res.rows.length - 1];
          after = [last.source, last.seq];
          let start = 0;
          for (let i = 1; i <= res.rows.length; i++) {
            if (i < res.rows.length && res.rows[i].source === res.rows[start].source) continue;
            const source = res.rows[start].source;
            const run = res.rows.slice(start, i);
            start = i;
            yield await batchOf(run, async (ids) => (await client.query<RawRow>('SELECT seq, row_bytes FROM gov_replica_rows WHERE source = $1 AND envelope_id = ANY($2)', [source, ids])).rows);
          }
          if (res.rows.length < size) break;
        }
      },
      async registeredManifests() {
        const out: Array<{ agent_id: string; manifest: Manifest }> = [];
        for (const [agentId, value] of await kvEntries(KV_MANIFESTS)) {
          try {
            out.push({ agent_id: agentId, manifest: (JSON.parse(value) as { manifest: Manifest }).manifest });
          } catch {
            // A manifest entry that does not parse is one the gateway could not load either.
          }
        }
        return out;
      },
      kv() {
        return {
          async get<T>(ns: string, k: string): Promise<T | undefined> {
            const json = await kvGet(ns, k);
            return json === undefined ? undefined : (JSON.parse(json) as T);
          },
          async entries<T>(ns: string): Promise<Array<[string, T]>> {
            return (await kvEntries(ns)).map(([k, json]): [string, T] => [k, JSON.parse(json) as T]);
          },
          put(): Promise<void> {
            return Promise.reject(new ReplaySourceError('the replay reads the central store read-only'));
          },
        };
      },
      close,
    };
  } catch (e) {
    await close();
    if (e instanceof ReplaySourceError) throw e;
    throw new ReplaySourceError(`cannot read the central store: ${(e as Error).message}`);
  }
}
