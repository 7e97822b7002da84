import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { loadRateLimits, type RateLimitRules } from '../config/rate-limits.js';
import type { Settings } from '../config/settings.js';
import { SCORING_CONFIG } from '../engine/scoring-config.js';
import { AnchoredLedger, HeadAnchorFile } from '../ledger/head-anchor.js';
import { openLmdbStorage } from '../ledger/lmdb.js';
import { openMemoryStorage } from '../ledger/memory.js';
import { parseEncryptionKey } from '../ledger/payload-cipher.js';
import type { Storage } from '../ledger/port.js';
import { loadGoldenRules } from '../policy/golden.js';
import { emptyPolicySet } from '../policy/policy-set.js';
import { PolicyLoadError } from '../policy/errors.js';
import { readYamlDir } from '../policy/loader.js';
import type { PolicySource } from '../policy/pack.js';
import { KvPolicyVersionStore } from '../policy/version-store.js';
import { loadManifestDir } from '../policy/manifest-files.js';
import { Governor, type RuleSet } from '../runtime/governor.js';
import { KillSwitch } from '../runtime/kill-switch.js';
import { ManifestRegistry } from '../runtime/manifest-registry.js';
import { PolicyRegistry, type FileSyncReport } from '../runtime/policy-registry.js';
import { fingerprint, PolicyDirWatcher } from '../runtime/policy-watcher.js';
import { classifierFailureLog, RemoteClassifier } from '../runtime/remote-classifier.js';
import { MemorySlidingWindowLimiter, type RateLimiter } from '../runtime/rate-limiter.js';
import { ReviewQueue } from '../runtime/review-queue.js';
import { PaymentIntents } from '../runtime/payment-intents.js';
import { HealthChecks, storeCheck, type HealthCheck } from '../runtime/health.js';
import { PeriodicRefresh } from '../runtime/state-refresh.js';
import type { RedisConnection } from '../store/redis-connection.js';
import { CachedAgentStats } from '../store/reliability-cache.js';
import type { JobQueues } from '../runtime/job-queue.js';
import { openJobQueues, REVIEW_PUSH_QUEUE } from './job-queues.js';
import { GovMetrics } from '../telemetry/metrics.js';
import { ThrottledLog } from '../telemetry/throttled-log.js';

/**
 * The parts every mode shares, built from settings with no HTTP: storage, the governor and what it reads
 * (kill switch, manifests, policies, review queue, remote classifier), the limiter, metrics and the logger.
 * The API app (compose/api-app.ts), the sidecar's proxy and later the client and the workers are built
 * on one of these. Nothing here imports Fastify (test/compose/core-imports.test.ts holds it to that).
 */
export interface Core {
  settings: Settings;
  storage: Storage;
  /** The governance service, shared by the API routes and (in the sidecar) the proxy. */
  governor: Governor;
  killSwitch: KillSwitch;
  manifests: ManifestRegistry;
  reviewQueue: ReviewQueue;
  /** Payment intents governed as pre-checks, idempotent by key (POST /v1/invoicepay/payments). */
  payments: PaymentIntents;
  /** Published policy versions and the active set (runtime/policy-registry.ts). */
  policies: PolicyRegistry;
  /** Hot reload of GOV_POLICY_DIR; null with GOV_POLICY_WATCH=false. */
  policyWatcher: PolicyDirWatcher | null;
  /** Brings the kill switch, the registered manifests and the active policy set up to the store every GOV_STATE_REFRESH_MS. */
  stateRefresh: PeriodicRefresh;
  /** The rate-limit port (Redis with GOV_REDIS_URL, else in process) and the rules of GOV_RATE_LIMIT_FILE. */
  limiter: RateLimiter;
  /** The Redis connection (GOV_REDIS_URL); null without it. */
  redis: RedisConnection | null;
  /** Probes of the store and Redis (a mode may add its own links): the health routes and gov_health_* gauges. */
  health: HealthChecks;
  /** The job queues (BullMQ with GOV_REDIS_URL, else in process); null when no queue is needed (no review webhook). */
  queues: JobQueues | null;
  rateRules: RateLimitRules;
  metrics: GovMetrics;
  logger: Logger;
  clock: () => Date;
  /** Stops the background work (policy watcher, state refresh), then closes storage and the classifier's client. */
  close(): Promise<void>;
}

export interface CoreOptions {
  clock?: () => Date;
  logger?: Logger;
  /**
   * Whether decisions read the agent's historical reliability from the ledger (the full gateway's
   * signal); without it the engine uses its neutral value.
   */
  historicalReliability?: boolean;
  /** GOV_LEDGER_DURABILITY=central: the sidecar's wait for the central acknowledgement (Governor). */
  awaitCentral?: (seq: number) => Promise<void>;
  /** The sidecar's replication backlog bound (Governor). */
  admissionRefusal?: () => Error | null;
}

export function createLogger(settings: Settings): Logger {
  return pino({
    level: settings.logLevel,
    base: { service: 'gov-gateway', mode: settings.mode },
    // Belt and braces: nothing logs headers or bodies, but if a future line does, secrets stay out.
    redact: { paths: ['req.headers.authorization', 'req.headers["x-gov-token"]', 'headers.authorization', 'headers["x-gov-token"]', 'token', 'payload', 'body'], censor: '[redacted]' },
  }, logDestination());
}

/**
 * Standard output, written asynchronously as pino's default is, but with minLength 1 instead of 0: each line
 * is still written at once, and `flush(cb)` then waits until the lines already logged are written (with 0 it
 * calls back at once). Shutdown exits after that flush (cli/signals.ts): an exit with a write still queued
 * lost the last lines, the sidecar thread's "shutting down" among them, on a busy machine.
 */
function logDestination() {
  return pino.destination({ dest: 1, sync: false, minLength: 1 });
}

async function openStorage(settings: Settings, logger: Logger): Promise<Storage> {
  const encryptionKey = settings.auditEncryptionKey === null ? undefined : parseEncryptionKey(settings.auditEncryptionKey);
  if (settings.databaseUrl !== null) {
    // Loaded only when used: pg and ioredis cost a sidecar, which never uses them, ~11 MB of resident memory.
    const { openPostgresStorage } = await import('../ledger/postgres.js');
    return openPostgresStorage(settings.databaseUrl, {
      encryptionKey,
      source: settings.sourceId,
      maxPendingRows: settings.ledgerMaxPendingRows,
      onError: (e) => logger.warn({ err: { message: e.message } }, 'a pooled PostgreSQL connection failed; the pool reconnects on the next statement'),
    });
  }
  if (settings.dbPath === ':memory:') return openMemoryStorage({ encryptionKey, source: settings.sourceId });
  mkdirSync(settings.dbPath, { recursive: true });
  const storage = await openLmdbStorage(settings.dbPath, { encryptionKey, source: settings.sourceId, durability: settings.ledgerDurability === 'disk' ? 'fsync' : 'commit', maxPendingRows: settings.ledgerMaxPendingRows });
  const a = settings.ledgerAnchor;
  if (a === null) return storage;
  let ledger: AnchoredLedger;
  try {
    const file = new HeadAnchorFile(a.file, a.key === null ? null : Buffer.from(a.key));
    ledger = new AnchoredLedger(storage.ledger, file, a.intervalMs, (e) => logger.error({ err: { message: (e as Error).message } }, 'head anchor write failed'));
  } catch (e) {
    await storage.close();
    throw e;
  }
  // Closing the anchored ledger anchors the final head, then closes the inner ledger; the environment after.
  return { ledger, kv: storage.kv, replicas: storage.replicas, close: async () => { await ledger.close(); await storage.close(); } };
}

async function readPolicySources(dir: string): Promise<PolicySource[]> {
  try {
    return await readYamlDir(dir);
  } catch (e) {
    throw new PolicyLoadError(dir, [`cannot read policy directory: ${(e as Error).message}`]);
  }
}

/** Logs a reload pass: what changed, and each refused file by line, column and reason (never its content). */
function logPolicyReport(logger: Logger, report: FileSyncReport): void {
  for (const e of report.errors) {
    for (const p of e.located) {
      logger.error({ policy_file: e.origin, line: p.line, column: p.column, path: p.path, reason: p.message }, 'policy file refused; its pack keeps its last good version');
    }
  }
  if (report.published.length > 0 || report.activated.length > 0) {
    logger.info({ published: report.published, activated: report.activated, policy_version: report.policy_version }, 'policy files reloaded');
  }
  if (report.kept.length > 0) logger.warn({ kept: report.kept }, 'policy files name other versions than the ones activated through the API; the API activation stands');
}

/**
 * Builds the core from settings: files first (policies, golden rules, manifests, rate limits), so a bad
 * file stops start-up before storage opens; then storage, the policy registry (strict start-up sync of
 * GOV_POLICY_DIR), and the governor. Which store and limiter adapters to use is decided here, from
 * settings alone; which auth, health path and signals a mode has is decided by its own composition.
 */
export async function composeCore(settings: Settings, opts: CoreOptions = {}): Promise<Core> {
  const clock = opts.clock ?? (() => new Date());
  const logger = opts.logger ?? createLogger(settings);
  const policySources = await readPolicySources(settings.policyDir);
  const golden = await loadGoldenRules(settings.manifestDir);
  const manifestFiles = await loadManifestDir(join(settings.manifestDir, 'agents'));
  const rateRules = await loadRateLimits(settings.rateLimitFile);
  const storage = await openStorage(settings, logger);
  const metrics = new GovMetrics();

  // One RuleSet object, replaced when the active policy set changes, so the per-call read allocates nothing.
  let rules: RuleSet = { policies: emptyPolicySet(), golden, config: SCORING_CONFIG };
  const policies = new PolicyRegistry({
    store: new KvPolicyVersionStore(storage.kv),
    ledger: storage.ledger,
    clock,
    scoreVersion: SCORING_CONFIG.version,
    onActiveChange: (set) => {
      rules = { ...rules, policies: set };
      metrics.setActivePolicy(set.version);
    },
  });
  let policyWatcher: PolicyDirWatcher | null = null;
  let killSwitch: KillSwitch;
  let manifests: ManifestRegistry;
  try {
    killSwitch = await KillSwitch.open(storage.kv, settings.envKillSwitch);
    manifests = await ManifestRegistry.open(storage.kv, manifestFiles);
    try {
      await policies.loadActive();
    } catch (e) {
      // A stored active version this release no longer reads: a file may replace it below; if none does,
      // the strict load after the sync stops start-up naming it.
      if (!(e instanceof PolicyLoadError)) throw e;
    }
    // Start-up is strict, as before: a bad pack file stops the process rather than run without it.
    const report = await policies.syncFiles(policySources, true);
    await policies.loadActive();
    logPolicyReport(logger, report);
    if (settings.policyWatch) {
      policyWatcher = new PolicyDirWatcher({
        dir: settings.policyDir,
        registry: policies,
        intervalMs: settings.policyWatchIntervalMs,
        onReport: (r) => {
          metrics.recordPolicyReload(r.errors.length);
          logPolicyReport(logger, r);
        },
      }, fingerprint(policySources));
      policyWatcher.start();
    }
  } catch (e) {
    await policyWatcher?.close();
    await storage.close();
    throw e;
  }

  // Never throws for an unreachable Redis: it reconnects in the background and the limits follow their
  // Redis-down behaviour meanwhile (runtime/rate-limit-scopes.ts).
  let redis: RedisConnection | null = null;
  let limiter: RateLimiter = new MemorySlidingWindowLimiter();
  if (settings.redis !== null) {
    const [{ openRedisConnection }, { RedisSlidingWindowLimiter }] = await Promise.all([import('../store/redis-connection.js'), import('../store/redis-limiter.js')]);
    redis = await openRedisConnection(settings.redis, logger, (up) => metrics.setRedisUp(up));
    limiter = new RedisSlidingWindowLimiter(redis.client, redis.keyPrefix);
  }

  // Replicas sharing a store see each other's kill switch, manifests and policy activations within
  // GOV_STATE_REFRESH_MS (plus one read); decisions never wait on the store for them (docs/deployment.md,
  // "Shared state").
  const stateRefresh = new PeriodicRefresh(async () => {
    const [switched, registered, activated] = await Promise.allSettled([killSwitch.refresh(), manifests.refresh(), policies.refresh()]);
    if (registered.status === 'fulfilled') {
      for (const e of registered.value) logger.error({ err: { message: e.message } }, 'registered manifest refused; its agent keeps the manifest it had');
    }
    if (activated.status === 'fulfilled' && activated.value) logger.info({ policy_version: policies.current().version }, 'policy set changed through another replica');
    const failed = [switched, registered, activated].find((r) => r.status === 'rejected');
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  }, settings.stateRefreshMs, (e) => logger.warn({ err: { message: (e as Error).message } }, 'shared state refresh failed; the last known kill switch, manifests and policy set stay in force'));
  stateRefresh.start();
  const opened = await openJobQueues(settings, logger, metrics);
  const pushLog = new ThrottledLog((fields, msg) => logger.warn(fields, msg));
  const reviewQueue = new ReviewQueue({
    kv: storage.kv,
    push: opened?.reviewPush ?? null,
    onPushDeferred: (e) => {
      metrics.queueEnqueueDeferred.inc({ queue: REVIEW_PUSH_QUEUE });
      pushLog.log({ err: { message: (e as Error).message } }, 'review push not enqueued (job queue unavailable); kept in the store for the next sweep');
    },
  });
  // Pushes the queue did not take (Redis down, a crash before it did) are handed over again; at start too.
  const pushSweep = new PeriodicRefresh(async () => {
    await reviewQueue.sweep(new Date(clock().getTime() - settings.queues.sweepMs));
  }, opened === null ? 0 : settings.queues.sweepMs, (e) => logger.warn({ err: { message: (e as Error).message } }, 'review push sweep failed; the next one tries again'));
  pushSweep.start(true);
  if (opened !== null) {
    const queue = opened.reviewPush;
    metrics.watchQueues(async () => {
      if (redis !== null && !redis.up()) throw new Error('redis down');
      return [[queue.name, await queue.counts()]];
    }, () => reviewQueue.pendingPushes());
  }
  const ttl = settings.queues.reliabilityCacheTtlMs;
  const statsCache = redis !== null && ttl > 0 && opts.historicalReliability === true
    ? new CachedAgentStats(storage.ledger, redis, ttl, (result) => metrics.reliabilityCacheReads.inc({ result }))
    : null;
  // GOV_DETECTOR_URL unset: no client exists and no decision awaits anything (zero cost).
  const classifier = settings.detector === null ? null : new RemoteClassifier(settings.detector);
  const governor = new Governor({
    ledger: storage.ledger,
    killSwitch,
    manifests,
    reviewQueue,
    rules: () => rules,
    useHistoricalReliability: opts.historicalReliability ?? false,
    agentStats: statsCache === null ? undefined : (agentId) => statsCache.agentStats(agentId),
    reviewSlaMinutes: settings.reviewSlaMinutes,
    backpressureWaitMs: settings.ledgerBackpressureWaitMs,
    maxStoredTextChars: settings.auditMaxTextChars,
    clock,
    classifier,
    onClassifierFailure: classifierFailureLog((fields, msg) => logger.warn(fields, msg)),
    onClassified: (v) => metrics.classifierCalls.inc({ result: v.status === 'ok' && v.score !== null && v.score >= v.threshold ? 'flagged' : v.status }),
    onDecision: (agent, outcome, ms) => metrics.recordDecision(agent, outcome, ms),
    onBackgroundError: (e) => logger.error({ err: { message: (e as Error).message } }, 'review queue push failed'),
    awaitCentral: opts.awaitCentral,
    admissionRefusal: opts.admissionRefusal,
  });

  const payments = new PaymentIntents({ governor, ledger: storage.ledger, kv: storage.kv, clock });
  metrics.watchLedger(storage.ledger, settings.ledgerMaxPendingRows);
  const checks: HealthCheck[] = [storeCheck(settings.databaseUrl === null ? 'ledger' : 'database', storage.kv, settings.sourceId)];
  if (redis !== null) checks.push({ name: 'redis', neededForCalls: false, probe: async () => void (await redis.client.ping()) });
  const health = new HealthChecks(checks, settings.healthTimeoutMs, metrics, logger);

  let closing: Promise<void> | null = null;
  return {
    settings,
    storage,
    governor,
    killSwitch,
    manifests,
    reviewQueue,
    payments,
    policies,
    policyWatcher,
    stateRefresh,
    limiter,
    redis,
    health,
    queues: opened?.queues ?? null,
    rateRules,
    metrics,
    logger,
    clock,
    close() {
      closing ??= (async () => {
        await policyWatcher?.close();
        await stateRefresh.close();
        // Queues first: an in-process job left unfinished releases the sweep waiting on it, and stays pending in the store.
        await opened?.queues.close();
        await pushSweep.close();
        await storage.close();
        await classifier?.close();
        await redis?.close();
      })();
      return closing;
    },
  };
}
