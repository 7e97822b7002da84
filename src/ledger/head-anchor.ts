import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { AuditListQuery, ChainVerifyResponse } from '../contracts/audit.js';
import type { AppendEntry, AppendOptions, Ledger } from './port.js';
import type { ListPlan } from './audit-query.js';

/** A checkpoint of the chain head kept outside the ledger: `hash` is the hash of row `seq`. */
export interface HeadAnchor {
  seq: number;
  hash: string;
  at: string;
  /** HMAC-SHA-256 (hex) of `seq:hash` under GOV_LEDGER_ANCHOR_KEY, when one is set. */
  mac?: string;
}

/** What verify() says about the anchor (ChainVerifyResponse.anchor). */
export type AnchorStatus = 'match' | 'missing' | 'unsigned' | 'forged' | 'mismatch' | 'truncated';

const macOf = (key: Buffer, seq: number, hash: string) => createHmac('sha256', key).update(`${seq}:${hash}`).digest('hex');

/**
 * The head anchor file. A hash chain proves that no row was changed, inserted or removed between the first
 * row and the head record, but someone who deletes the last rows together with the head record leaves a
 * shorter chain that verifies. The anchor keeps the head's seq and hash in a file of its own (put it on
 * another volume, or where the agent's user cannot write), optionally HMAC-signed with a key the ledger
 * never holds, and verify() compares the chain with it: a chain shorter than the anchor, or whose row at the
 * anchor's seq hashes otherwise, is reported invalid.
 */
export class HeadAnchorFile {
  constructor(
    readonly path: string,
    private readonly key: Buffer | null,
  ) {
    mkdirSync(dirname(path), { recursive: true });
  }

  read(): HeadAnchor | null {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw e;
    }
    const a = JSON.parse(text) as HeadAnchor;
    if (!Number.isSafeInteger(a.seq) || a.seq < 0 || typeof a.hash !== 'string') throw new Error(`head anchor ${this.path} is malformed`);
    return a;
  }

  /** `unsigned`: a key is set but the anchor carries no MAC; `forged`: its MAC is wrong. */
  authenticity(a: HeadAnchor): 'ok' | 'unsigned' | 'forged' {
    if (this.key === null) return 'ok';
    if (typeof a.mac !== 'string') return 'unsigned';
    const want = Buffer.from(macOf(this.key, a.seq, a.hash), 'hex');
    const got = Buffer.from(a.mac, 'hex');
    return got.length === want.length && timingSafeEqual(got, want) ? 'ok' : 'forged';
  }

  /** Replaces the anchor atomically (temporary file, fsync, rename). */
  async write(seq: number, hash: string): Promise<void> {
    const a: HeadAnchor = { seq, hash, at: new Date().toISOString() };
    if (this.key !== null) a.mac = macOf(this.key, seq, hash);
    const tmp = `${this.path}.tmp`;
    const fh = await open(tmp, 'w');
    try {
      await fh.writeFile(JSON.stringify(a));
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, this.path);
  }
}

/**
 * A ledger whose head is anchored: every `intervalMs` (and on close) the committed head is written to the
 * anchor file when it moved, and verify() compares the chain with the anchor. Every other call goes to the
 * inner ledger unchanged. Rows committed after the last anchor write are covered by the head record only,
 * so the interval bounds what a tail deletion can remove unnoticed.
 */
export class AnchoredLedger implements Ledger {
  private readonly timer: NodeJS.Timeout;
  private written: { seq: number; hash: string | null };
  private writing: Promise<void> = Promise.resolve();
  readonly erasePayload?: Ledger['erasePayload'];
  readonly room?: Ledger['room'];
  readonly pendingRows?: Ledger['pendingRows'];
  readonly readRows?: Ledger['readRows'];

  constructor(
    private readonly inner: Ledger,
    private readonly anchor: HeadAnchorFile,
    intervalMs: number,
    private readonly onError: (e: unknown) => void,
  ) {
    const prior = anchor.read();
    this.written = prior === null ? { seq: 0, hash: null } : { seq: prior.seq, hash: prior.hash };
    if (inner.erasePayload) this.erasePayload = inner.erasePayload.bind(inner);
    if (inner.room) this.room = inner.room.bind(inner);
    if (inner.pendingRows) this.pendingRows = inner.pendingRows.bind(inner);
    if (inner.readRows) this.readRows = inner.readRows.bind(inner);
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
  }

  /**
   * Writes the committed head to the anchor if it moved forward since the last write. Never backward: a
   * ledger reopened after its tail was cut starts from the shorter chain, and anchoring that would erase
   * the evidence; verify() reports it instead.
   */
  flush(): Promise<void> {
    this.writing = this.writing.then(async () => {
      const h = await this.inner.head();
      if (h.hash === null || h.seq <= this.written.seq) return;
      try {
        await this.anchor.write(h.seq, h.hash);
        this.written = h;
      } catch (e) {
        this.onError(e);
      }
    });
    return this.writing;
  }

  append(entry: AppendEntry, options?: AppendOptions) {
    return this.inner.append(entry, options);
  }
  get(envelopeId: string) {
    return this.inner.get(envelopeId);
  }
  list(query: AuditListQuery) {
    return this.inner.list(query);
  }
  listRows(plan: ListPlan) {
    return this.inner.listRows(plan);
  }
  postCheckOf(preCheckEnvelopeId: string) {
    return this.inner.postCheckOf(preCheckEnvelopeId);
  }
  agentStats(agentId: string) {
    return this.inner.agentStats(agentId);
  }

  agents(after?: string) {
    return this.inner.agents(after);
  }
  head() {
    return this.inner.head();
  }
  hashAt(seq: number) {
    return this.inner.hashAt?.(seq) ?? Promise.resolve(null);
  }

  async verify(): Promise<ChainVerifyResponse> {
    // Anchor what this process committed first: the running ledger's head is the one no file edit moves.
    await this.flush();
    const result = await this.inner.verify();
    let a: HeadAnchor | null;
    try {
      a = this.anchor.read();
    } catch {
      return { ...result, valid: false, anchor: { status: 'forged', seq: null } };
    }
    if (a === null) return { ...result, anchor: { status: 'missing', seq: null } };
    const auth = this.anchor.authenticity(a);
    if (auth !== 'ok') return { ...result, valid: false, anchor: { status: auth, seq: a.seq } };
    if (!result.valid) return { ...result, anchor: { status: 'match', seq: a.seq } };
    // A valid chain of rows_checked rows: the anchor must lie within it, on the same hash.
    if (a.seq > result.rows_checked) {
      return { valid: false, rows_checked: result.rows_checked, first_invalid_seq: result.rows_checked + 1, head_hash: result.head_hash, anchor: { status: 'truncated', seq: a.seq } };
    }
    const hash = a.seq === result.rows_checked ? result.head_hash : await this.hashAt(a.seq);
    if (hash !== a.hash) return { valid: false, rows_checked: result.rows_checked, first_invalid_seq: a.seq, head_hash: result.head_hash, anchor: { status: 'mismatch', seq: a.seq } };
    return { ...result, anchor: { status: 'match', seq: a.seq } };
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    // The last commits are anchored before the ledger closes: a clean shutdown leaves no window.
    await this.flush();
    await this.inner.close();
  }
}
