import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { gzip as gzipCallback } from 'node:zlib';
import type { Logger } from 'pino';
import { Pool } from '../net/undici-dispatchers.js';
import type { ReplicationSettings } from '../config/settings.js';
import { IngestRejection, IngestResponse, type IngestRequest } from '../contracts/replication.js';
import type { KvStore, Ledger, StoredRow } from '../ledger/port.js';
import { readAuditRow } from '../ledger/row-reader.js';
import { ProbeFailure, type HealthCheck } from '../runtime/health.js';
import { AppError } from '../server/app-error.js';
import type { GovMetrics } from '../telemetry/metrics.js';
import { HeadSightings } from './head-sightings.js';

const gzip = promisify(gzipCallback);

/** kv namespace and keys of the shipper's durable state in the sidecar's own store. */
export const REPLICATION_NS = 'replication';
const CURSOR_KEY = 'cursor';
const PRUNED_KEY = 'pruned';

/**
 * Rows of one batch stop at about this many stored bytes (at least one row is always sent), so a batch of
 * large rows stays far below the central gateway's GOV_INGEST_MAX_BYTES once base64-encoded.
 */
const MAX_BATCH_BYTES = 4 * 1024 * 1024;
/** Rows read per page while pruning. */
const PRUNE_PAGE_ROWS = 500;
const REQUEST_TIMEOUT_MS = 30_000;

type FailureReason = 'unreachable' | 'server_error' | 'rejected' | 'client_error';

class ShipFailure extends Error {
  constructor(
    readonly reason: FailureReason,
    message: string,
  ) {
    super(message);
  }
}

export interface ShipperOptions {
  ledger: Ledger;
  kv: KvStore;
  source: string;
  settings: ReplicationSettings;
  metrics: GovMetrics;
  logger: Logger;
  clock?: () => Date;
}

/**
 * Ships the sidecar's ledger rows to the central gateway (POST /v1/audit/ingest), at least once and in seq
 * order. The cursor, the last seq the central store acknowledged, is kept in the sidecar's own kv store and
 * moved only after the acknowledgement, so a restart (or SIGKILL) resumes at the first row not
 * acknowledged; a batch that was stored but whose answer was lost is sent again and the central store
 * counts it as duplicates. Nothing is ever dropped: while the central gateway is down or refuses, the
 * shipper retries with backoff and the rows wait in the local ledger (its backlog and lag are metrics).
 *
 * With GOV_REPLICATION_PRUNE_AFTER, rows at or below the cursor and older than that lose their local payload
 * (Ledger.erasePayload: header, chain and cursor stay, so local verify still passes).
 */
export class ReplicationShipper {
  private readonly pool: Pool;
  private readonly ingestPath: string;
  private readonly abort = new AbortController();
  private running: Promise<void> | null = null;
  private cursor = 0;
  private pruned = 0;
  private failures = 0;
  /** The outcome of the last batch sent (null before the first): what the sidecar's health reports. */
  private last: { reason: FailureReason | null; roundTripMs: number } | null = null;
  private backlogRows = 0;
  private lagSeconds = 0;
  private readonly sightings = new HeadSightings();
  private readonly clock: () => Date;
  /** Calls waiting for their row to be acknowledged (GOV_LEDGER_DURABILITY=central), in no order. */
  private readonly waiters = new Set<{ seq: number; done: (acknowledged: boolean) => void }>();
  /** Where the backlog stands against GOV_REPLICATION_MAX_BACKLOG_ROWS, so each crossing is logged once. */
  private backlogState: 'ok' | 'warned' | 'full' = 'ok';
  private gaugeTimer: NodeJS.Timeout | null = null;
  /** Cuts the idle wait between polls short when a waiter needs a row shipped now. */
  private nap: AbortController | null = null;
  /** A waiter arrived since the current pass began: skip the next idle wait once. */
  private kicked = false;

  constructor(private readonly opts: ShipperOptions) {
    const url = new URL(opts.settings.centralUrl);
    this.pool = new Pool(url.origin, { connections: 1, keepAliveTimeout: 10_000 });
    this.ingestPath = `${url.pathname.replace(/\/+$/, '')}/v1/audit/ingest`;
    this.clock = opts.clock ?? (() => new Date());
    if (opts.ledger.readRows === undefined) throw new Error('replication needs a ledger adapter that can read its stored rows');
  }

  /** The last seq the central store acknowledged (as loaded or last advanced). */
  get acknowledgedSeq(): number {
    return this.cursor;
  }

  /**
   * Resolves true once the central store acknowledged row `seq`, false after `timeoutMs` (or on close). A
   * caught-up shipper ships at once instead of at its next poll; one backing off after a failure keeps
   * its backoff, so critical calls cannot turn an outage into a retry storm.
   */
  acknowledged(seq: number, timeoutMs: number): Promise<boolean> {
    if (this.cursor >= seq) return Promise.resolve(true);
    if (this.abort.signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = {
        seq,
        done: (ok: boolean) => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          resolve(ok);
        },
      };
      const timer = setTimeout(() => waiter.done(false), timeoutMs);
      this.waiters.add(waiter);
      if (this.failures === 0) {
        this.kicked = true;
        this.nap?.abort();
      }
    });
  }

  /**
   * The link to the central store as the shipper last saw it, for health (no request of its own: a
   * caught-up shipper sends nothing, and its link is not down for that). `reason` is the last batch's
   * failure, null when it was acknowledged or none was sent yet.
   */
  link(): { reason: FailureReason | null; roundTripMs: number | null; backlogRows: number; lagSeconds: number; acknowledgedSeq: number } {
    return { reason: this.last?.reason ?? null, roundTripMs: this.last?.roundTripMs ?? null, backlogRows: this.backlogRows, lagSeconds: this.lagSeconds, acknowledgedSeq: this.cursor };
  }

  /**
   * The refusal of new calls while the backlog is at GOV_REPLICATION_MAX_BACKLOG_ROWS (fail closed: a call
   * whose row could not be replicated before the disk fills is not taken), else null. Reads the backlog as
   * last counted, at most GOV_REPLICATION_DELAY_MS ago, so the bound may be passed by that much traffic.
   */
  backlogRefusal(): AppError | null {
    const max = this.opts.settings.maxBacklogRows;
    if (max === 0 || this.backlogRows < max) return null;
    return new AppError('unavailable', `the replication backlog is at its limit (${this.backlogRows} rows not yet acknowledged by the central store, GOV_REPLICATION_MAX_BACKLOG_ROWS=${max}): new calls are refused until it catches up`, undefined, { 'retry-after': '5' });
  }

  start(): void {
    if (this.opts.settings.maxBacklogRows > 0) {
      this.opts.metrics.replicationBacklogLimit.set(this.opts.settings.maxBacklogRows);
      // Counted between shipping passes too: a backing-off shipper may sleep for GOV_REPLICATION_RETRY_MAX_MS.
      this.gaugeTimer = setInterval(() => void this.updateGauges().catch(() => undefined), this.opts.settings.delayMs);
      this.gaugeTimer.unref();
    }
    this.running ??= this.run().catch((e: unknown) => {
      if (!this.abort.signal.aborted) this.opts.logger.error({ err: { message: (e as Error).message } }, 'replication stopped');
    });
  }

  /** Stops shipping: an attempt in flight is abandoned unacknowledged (it is sent again after a restart). */
  async close(): Promise<void> {
    if (this.gaugeTimer !== null) clearInterval(this.gaugeTimer);
    this.abort.abort();
    for (const w of [...this.waiters]) w.done(false);
    await this.running;
    await this.pool.close();
  }

  private async run(): Promise<void> {
    const { kv, settings, logger } = this.opts;
    this.cursor = (await kv.get<{ seq: number }>(REPLICATION_NS, CURSOR_KEY))?.seq ?? 0;
    this.pruned = (await kv.get<{ seq: number }>(REPLICATION_NS, PRUNED_KEY))?.seq ?? 0;
    logger.info({ central: new URL(settings.centralUrl).origin, acknowledged_seq: this.cursor }, 'replication to the central gateway started');
    while (!this.abort.signal.aborted) {
      let wait = settings.delayMs;
      this.kicked = false;
      try {
        const shipped = await this.shipBatch();
        if (this.failures > 0) logger.info({ acknowledged_seq: this.cursor }, 'replication resumed');
        this.failures = 0;
        if (shipped > 0) wait = 0;
        else await this.prune();
      } catch (e) {
        if (this.abort.signal.aborted) break;
        this.failures++;
        const reason = e instanceof ShipFailure ? e.reason : 'unreachable';
        this.last = { reason, roundTripMs: this.last?.roundTripMs ?? 0 };
        this.opts.metrics.replicationFailures.inc({ reason });
        wait = Math.min(settings.retryMaxMs, settings.delayMs * 2 ** Math.min(this.failures, 20));
        const fields = { reason, attempt: this.failures, retry_in_ms: wait, acknowledged_seq: this.cursor, err: { message: (e as Error).message } };
        if (reason === 'rejected') logger.error(fields, 'the central gateway refused a replicated batch; rows stay local and are retried');
        else logger.warn(fields, 'replication attempt failed; rows stay local and are retried');
      }
      await this.updateGauges().catch(() => undefined);
      if (wait > 0 && !(this.kicked && this.failures === 0)) {
        this.nap = new AbortController();
        await sleep(wait, undefined, { signal: AbortSignal.any([this.abort.signal, this.nap.signal]) }).catch(() => undefined);
        this.nap = null;
      }
    }
  }

  /** Sends the rows after the cursor (one batch); returns how many the central store acknowledged. */
  private async shipBatch(): Promise<number> {
    const rows = await this.opts.ledger.readRows!(this.cursor, this.opts.settings.batchRows);
    let bytes = 0;
    let n = 0;
    while (n < rows.length && (n === 0 || bytes + rows[n].bytes.length <= MAX_BATCH_BYTES)) bytes += rows[n++].bytes.length;
    const batch = rows.slice(0, n);
    if (batch.length === 0) return 0;
    const last = batch[batch.length - 1].seq;
    const sent = performance.now();
    const answer = await this.post(batch);
    this.last = { reason: null, roundTripMs: performance.now() - sent };
    if (answer.head.seq < last) throw new ShipFailure('server_error', `the central gateway acknowledged seq ${answer.head.seq}, not ${last}`);
    await this.advance(last);
    this.opts.metrics.replicationShipped.inc(answer.stored);
    return batch.length;
  }

  private async advance(seq: number): Promise<void> {
    await this.opts.kv.put(REPLICATION_NS, CURSOR_KEY, { seq });
    this.cursor = seq;
    for (const w of [...this.waiters]) if (w.seq <= seq) w.done(true);
  }


  private async post(rows: StoredRow[]): Promise<IngestResponse> {
    const request: IngestRequest = { source: this.opts.source, rows: rows.map((r) => ({ seq: r.seq, row: r.bytes.toString('base64') })) };
    const body = await gzip(Buffer.from(JSON.stringify(request)));
    let res;
    try {
      res = await this.pool.request({
        method: 'POST',
        path: this.ingestPath,
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', 'x-gov-token': this.opts.settings.key },
        body,
        signal: AbortSignal.any([this.abort.signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]),
      });
    } catch (e) {
      throw new ShipFailure('unreachable', `cannot reach the central gateway: ${(e as Error).message}`);
    }
    const text = await res.body.text().catch(() => '');
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (res.statusCode === 200) {
      const ok = IngestResponse.safeParse(json);
      if (!ok.success) throw new ShipFailure('server_error', 'the central gateway answered 200 without an ingest acknowledgement');
      return ok.data;
    }
    if (res.statusCode >= 500) throw new ShipFailure('server_error', `the central gateway answered ${res.statusCode}`);
    const rejection = IngestRejection.safeParse((json as { error?: { details?: unknown } } | undefined)?.error?.details);
    if (res.statusCode === 409 && rejection.success) {
      const r = rejection.data;
      // The central store holds less of this chain than the cursor says (restored from a backup, or a new
      // central store): go back to its head and ship from there; every row is still in the local ledger.
      if (r.reason === 'gap' && r.head.seq < this.cursor) {
        this.opts.logger.warn({ acknowledged_seq: this.cursor, central_head_seq: r.head.seq }, 'the central gateway holds fewer rows of this source than it acknowledged; shipping again from its head');
        await this.advance(r.head.seq);
        throw new ShipFailure('rejected', 'rewound to the central head');
      }
      throw new ShipFailure('rejected', `refused (${r.reason}) at seq ${r.first_bad_seq}: ${(json as { error: { message: string } }).error.message}`);
    }
    throw new ShipFailure(res.statusCode === 409 || res.statusCode === 422 ? 'rejected' : 'client_error', `the central gateway answered ${res.statusCode}`);
  }

  /** Drops the local payload of acknowledged rows older than GOV_REPLICATION_PRUNE_AFTER. */
  private async prune(): Promise<void> {
    const after = this.opts.settings.pruneAfterMs;
    const erase = this.opts.ledger.erasePayload?.bind(this.opts.ledger);
    if (after === null || erase === undefined) return;
    const cutoff = this.clock().getTime() - after;
    while (this.pruned < this.cursor && !this.abort.signal.aborted) {
      const rows = await this.opts.ledger.readRows!(this.pruned, Math.min(PRUNE_PAGE_ROWS, this.cursor - this.pruned));
      if (rows.length === 0) return;
      let done = this.pruned;
      for (const r of rows) {
        const row = readAuditRow(r.bytes, r.seq);
        // Rows are appended in time order (nearly: concurrent calls), so the first young row ends the pass.
        if (Date.parse(row.timestamp) > cutoff) break;
        await erase(row.envelope_id);
        this.opts.metrics.replicationPruned.inc();
        done = r.seq;
      }
      if (done === this.pruned) return;
      await this.opts.kv.put(REPLICATION_NS, PRUNED_KEY, { seq: done });
      this.pruned = done;
    }
  }

  /** Logs each crossing of the backlog bound once: the warning, the refusal, and the return below it. */
  private alarmBacklog(): void {
    const max = this.opts.settings.maxBacklogRows;
    if (max === 0) return;
    const rows = this.backlogRows;
    const fields = { backlog_rows: rows, max_backlog_rows: max, acknowledged_seq: this.cursor };
    const { logger } = this.opts;
    if (rows >= max) {
      if (this.backlogState !== 'full') logger.error(fields, 'replication backlog at its limit: new calls are refused (fail closed) until the central gateway catches up');
      this.backlogState = 'full';
      return;
    }
    if (this.backlogState === 'full') {
      logger.info(fields, 'replication backlog below its limit: calls are taken again');
      this.backlogState = 'warned';
    }
    if (rows >= max * BACKLOG_WARN_SHARE && this.backlogState === 'ok') {
      logger.warn(fields, 'replication backlog above 80 % of its limit: calls will be refused at the limit');
      this.backlogState = 'warned';
    } else if (rows < max * BACKLOG_CLEAR_SHARE) {
      this.backlogState = 'ok';
    }
  }

  private async updateGauges(): Promise<void> {
    const head = await this.opts.ledger.head();
    const now = this.clock().getTime();
    this.sightings.saw(head.seq, now);
    this.sightings.forget(this.cursor);
    this.backlogRows = Math.max(0, head.seq - this.cursor);
    this.opts.metrics.replicationBacklog.set(this.backlogRows);
    this.alarmBacklog();
    const next = await this.opts.ledger.readRows!(this.cursor, 1);
    let lagMs = 0;
    if (next.length > 0) {
      // From the row's own time, or from the last sighting of the ledger without it (it arrived after
      // that), whichever is later: a replayed call's old timestamp is not a lag of the link.
      const since = Math.max(Date.parse(readAuditRow(next[0].bytes, next[0].seq).timestamp), this.sightings.before(next[0].seq) ?? -Infinity);
      lagMs = now - since;
    }
    this.lagSeconds = Math.max(0, lagMs) / 1000;
    this.opts.metrics.replicationLag.set(this.lagSeconds);
  }
}

/** Warned at this share of GOV_REPLICATION_MAX_BACKLOG_ROWS, cleared below the lower one (no flapping). */
const BACKLOG_WARN_SHARE = 0.8;
const BACKLOG_CLEAR_SHARE = 0.5;

/**
 * The sidecar's central link as a health component: down while the shipper's last batch failed, with the
 * backlog and lag beside it. Not needed for calls: the sidecar keeps governing while rows wait in its
 * ledger (backpressure, not loss), so a central outage must not make the pod unready.
 */
export function centralLinkCheck(shipper: ReplicationShipper): HealthCheck {
  return {
    name: 'central',
    neededForCalls: false,
    probe: async () => {
      const l = shipper.link();
      const details = { backlog_rows: l.backlogRows, lag_seconds: l.lagSeconds, acknowledged_seq: l.acknowledgedSeq };
      if (l.reason !== null) throw new ProbeFailure(l.reason, `the last replicated batch failed (${l.reason})`, details);
      return { details, ...(l.roundTripMs === null ? {} : { latencyMs: l.roundTripMs }) };
    },
  };
}
