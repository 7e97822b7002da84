import { existsSync, statSync } from 'node:fs';
import { open, type Database, type RootDatabase } from 'lmdb';
import type { Manifest } from '../contracts/manifest.js';
import type { KvStore } from '../ledger/port.js';
import { lastStoredSeq, ledgerDataFile, LMDB_DB_NAMES, LMDB_ENV_OPTIONS, LMDB_INDEXED_KEY, openRawRows } from '../ledger/lmdb-layout.js';
import { readAuditRow } from '../ledger/row-reader.js';
import { journalContinuation, journalPathOf, readJournal, type JournalRow } from '../ledger/row-journal.js';
import { keyFingerprint } from '../ledger/payload-cipher.js';
import type { ReplayRow } from './replay.js';
import { replayRow, ReplaySourceError } from './replay-row.js';

/**
 * The stored rows of an LMDB ledger, read for `gov policy replay` without ever writing: the environment is
 * opened read-only (MDB_RDONLY: no write transaction can begin, and the gateway or sidecar writing the same
 * ledger meanwhile is one more LMDB reader's worth of concern), and every row is read inside one read
 * snapshot, so rows the writer appends during the replay are not seen and nothing shifts underneath.
 *
 * At the `process` durability level a writer acknowledges rows once they are in its journal and LMDB takes
 * them up to 50 ms later, or, when the writer was killed, at its next open (ledger/row-journal.ts). So the
 * snapshot is followed by the journal's rows that continue it: the next seqs, each linked to the one before by
 * its prev_hash. A journal that does not continue the snapshot (the writer moved its rows into LMDB after the
 * snapshot was taken and journaled newer ones) holds nothing the snapshot is owed, and is not read.
 */

export interface LedgerReader {
  /**
   * The rows from seq `start` up to (not including) `end` (default: all), in seq order, inside the
   * snapshot; each payload is decoded only when asked for, and before the next row is read.
   */
  rows(start?: number, end?: number): Iterable<ReplayRow>;
  /** A row by envelope id (the pre-check of a post-check outside the replayed range), or null. */
  byEnvelope(envelopeId: string): ReplayRow | null;
  /** Manifests registered through the API (the `manifests` namespace of the ledger's key-value store). */
  registeredManifests(): Array<{ agent_id: string; manifest: Manifest }>;
  /** The last seq stored in the snapshot (0 when empty). */
  headSeq(): number;
  /** The ledger's key-value store as of the snapshot, read-only (the policy version store reads through it). */
  kv(): KvStore;
  close(): Promise<void>;
}

const KV_MANIFESTS = 'manifests';

/**
 * Opens the ledger at `path` read-only. `encryptionKey` decrypts encrypted payloads; without one they are
 * reported as undecryptable. A key that is not the ledger's is an error, as it is for the gateway.
 */
export function openLedgerReader(path: string, encryptionKey?: Buffer): LedgerReader {
  const dataFile = ledgerDataFile(path);
  if (!existsSync(dataFile) || !statSync(dataFile).isFile()) throw new ReplaySourceError(`no ledger at ${path} (expected ${dataFile})`);
  let env: RootDatabase;
  try {
    env = open({ path, ...LMDB_ENV_OPTIONS, readOnly: true });
  } catch (e) {
    throw new ReplaySourceError(`cannot open the ledger at ${path} read-only: ${(e as Error).message}`);
  }
  try {
    const meta = env.openDB<unknown, string>(LMDB_DB_NAMES.meta, {});
    const fingerprint = meta.get('key_fingerprint') as string | undefined;
    if (encryptionKey !== undefined && fingerprint !== undefined && fingerprint !== keyFingerprint(encryptionKey)) {
      throw new ReplaySourceError(`the audit encryption key does not match the key the ledger at ${path} was written with`);
    }
    const key = encryptionKey !== undefined && fingerprint !== undefined ? encryptionKey : undefined;
    const rowsRaw = openRawRows(env);
    // Lookups copy the value: the range being iterated holds a zero-copy view a read would overwrite.
    const rowsCopied = env.openDB<Buffer, number>(LMDB_DB_NAMES.rows, { encoding: 'binary' });
    const envelopes = env.openDB<number, string>(LMDB_DB_NAMES.envelopes, {});
    const kv = env.openDB<string, [string, string]>(LMDB_DB_NAMES.kv, { encoding: 'string' });
    // One snapshot for the whole replay: rows appended meanwhile are not part of it.
    const txn = env.useReadTransaction();
    let done = false;
    const journal = journalTail(path, rowsRaw, rowsCopied, txn);
    const journalByEnvelope = new Map<string, JournalRow>();
    for (const r of journal) {
      try {
        journalByEnvelope.set(readAuditRow(r.bytes, r.seq).envelope_id, r);
      } catch {
        // A row whose header cannot be read names no envelope; the chain's verification reports it.
      }
    }
    // The writer indexes rows a little after it commits them (ledger/lmdb.ts, INDEX_BATCH_ROWS): the
    // envelopes of rows past its watermark are found by reading those rows, once, on the first miss.
    let tail: Map<string, number> | null = null;
    const unindexed = (): Map<string, number> => {
      if (tail !== null) return tail;
      tail = new Map();
      const indexed = meta.get(LMDB_INDEXED_KEY, { transaction: txn });
      const start = typeof indexed === 'number' ? indexed + 1 : null;
      if (start === null) return tail;
      for (const { key: seq, value } of rowsRaw.getRange({ transaction: txn, start })) {
        if (typeof seq !== 'number') continue;
        try {
          const id = readAuditRow(value, seq).envelope_id;
          if (!tail.has(id)) tail.set(id, seq);
        } catch {
          // An unreadable row names no envelope; the chain's verification reports it.
        }
      }
      return tail;
    };
    return {
      *rows(start?: number, end?: number) {
        const range = { transaction: txn, ...(start !== undefined ? { start } : {}), ...(end !== undefined ? { end } : {}) };
        for (const { key: seq, value } of rowsRaw.getRange(range)) {
          if (typeof seq !== 'number') continue;
          yield replayRow(value, seq, key);
        }
        for (const r of journal) {
          if ((start === undefined || r.seq >= start) && (end === undefined || r.seq < end)) yield replayRow(r.bytes, r.seq, key);
        }
      },
      byEnvelope(envelopeId) {
        const seq = envelopes.get(envelopeId, { transaction: txn }) ?? unindexed().get(envelopeId);
        if (typeof seq !== 'number') {
          const journaled = journalByEnvelope.get(envelopeId);
          return journaled === undefined ? null : replayRow(journaled.bytes, journaled.seq, key);
        }
        const raw = rowsCopied.get(seq, { transaction: txn });
        if (raw === undefined) return null;
        return replayRow(raw, seq, key);
      },
      registeredManifests() {
        const out: Array<{ agent_id: string; manifest: Manifest }> = [];
        for (const { key: k, value } of kv.getRange({ start: [KV_MANIFESTS], transaction: txn })) {
          if (!Array.isArray(k) || k[0] !== KV_MANIFESTS) break;
          try {
            out.push({ agent_id: String(k[1]), manifest: (JSON.parse(value) as { manifest: Manifest }).manifest });
          } catch {
            // A manifest entry that does not parse is one the gateway could not load either.
          }
        }
        return out;
      },
      kv() {
        return {
          async get<T>(ns: string, k: string): Promise<T | undefined> {
            const json = kv.get([ns, k], { transaction: txn });
            return json === undefined ? undefined : (JSON.parse(json) as T);
          },
          async entries<T>(ns: string): Promise<Array<[string, T]>> {
            const out: Array<[string, T]> = [];
            for (const { key: k, value } of kv.getRange({ start: [ns], end: [ns + '\u0000'], transaction: txn })) {
              if (Array.isArray(k) && k[0] === ns) out.push([String(k[1]), JSON.parse(value) as T]);
            }
            return out;
          },
          put(): Promise<void> {
            return Promise.reject(new ReplaySourceError('the replay reads the ledger read-only'));
          },
        };
      },
      headSeq() {
        if (journal.length > 0) return journal[journal.length - 1].seq;
        return lastStoredSeq(rowsRaw, txn);
      },
      async close() {
        if (done) return;
        done = true;
        txn.done();
        await env.close();
      },
    };
  } catch (e) {
    void env.close();
    throw e;
  }
}

type RawRows = ReturnType<typeof openRawRows>;
type ReadTxn = ReturnType<RootDatabase['useReadTransaction']>;

/**
 * The journal's rows that continue the snapshot (row-journal.ts, journalContinuation): rows the snapshot already
 * holds (LMDB took them before the journal was emptied) are skipped, and the first row that does not continue
 * the chain ends what is read.
 */
function journalTail(path: string, rowsRaw: RawRows, rowsCopied: Database<Buffer, number>, txn: ReadTxn): JournalRow[] {
  const rows = readJournal(journalPathOf(path));
  if (rows.length === 0) return [];
  return journalContinuation(rows, lastStoredSeq(rowsRaw, txn), (seq) => rowsCopied.get(seq, { transaction: txn })).tail;
}
