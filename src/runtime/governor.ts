import type { Outcome } from '../contracts/common.js';
import type {
  DecisionRerunResponse,
  PostCheckRequest,
  PostCheckResponse,
  PreCheckRequest,
  PreCheckResponse,
  ValidateRequest,
  ValidateResponse,
} from '../contracts/runtime.js';
import { CLIENT_TIMESTAMP_MAX_AGE_MS, CLIENT_TIMESTAMP_MAX_SKEW_MS } from '../contracts/runtime.js';
import type { Phase } from '../contracts/audit.js';
import { evaluate } from '../engine/pipeline.js';
import { fromPostCheck, fromPreCheck, fromValidate } from '../engine/normalize.js';
import { reliabilityFromStats, type ReliabilityStats } from '../engine/reliability.js';
import type { ScoringConfig } from '../engine/scoring-config.js';
import type { EngineInput, EngineResult, ExternalDetectorVerdict } from '../engine/types.js';
import { newEnvelopeId } from '../ledger/envelope-id.js';
import { boundPayload, digestContext } from '../ledger/bounded-payload.js';
import { maskPayload } from '../ledger/masked-payload.js';
import { LedgerConflictError, LedgerUnavailableError } from '../ledger/errors.js';
import type { AppendOptions, Ledger } from '../ledger/port.js';
import type { GoldenSet } from '../policy/golden.js';
import type { PolicySet } from '../policy/policy-set.js';
import { AppError } from '../server/app-error.js';
import type { KillSwitch } from './kill-switch.js';
import type { ManifestRegistry } from './manifest-registry.js';
import type { ReviewQueue } from './review-queue.js';
import { holdBlockedPreCheck, storedEngineInput, type StoredPayload } from './stored-input.js';

/** Policies, golden rules and the scoring config in force; replaced as a whole when they are reloaded. */
export interface RuleSet {
  policies: PolicySet;
  golden: GoldenSet;
  config: ScoringConfig;
}

export interface GovernorDeps {
  ledger: Ledger;
  killSwitch: KillSwitch;
  manifests: ManifestRegistry;
  reviewQueue: ReviewQueue;
  rules: () => RuleSet;
  /**
   * Whether decisions read the agent's historical reliability from the ledger (the gateway's signal). Off
   * (embedded, sidecar): the engine uses its neutral value and no decision waits on a stats read.
   */
  useHistoricalReliability: boolean;
  /**
   * Where that signal's history is read: the ledger's agentStats by default; in full mode a Redis cache in
   * front of it (store/reliability-cache.ts), read cache then store as the spec's step 1 says.
   */
  agentStats?: (agentId: string) => Promise<ReliabilityStats>;
  reviewSlaMinutes: number;
  /** How long new work waits for the ledger's backlog to drain before it is refused (Ledger.room). */
  backpressureWaitMs: number;
  /** Longest string a row's payload stores whole (ledger/bounded-payload.ts); decisions read everything. */
  maxStoredTextChars: number;
  clock: () => Date;
  /**
   * The optional remote classifier (GOV_DETECTOR_URL), asked before each decision; absent: never called.
   * It never throws: a failure is a verdict whose status the engine applies the failure mode to.
   */
  classifier?: RemoteClassifierPort | null;
  /** A classifier call that timed out or failed (the status and reason only, never the text). */
  onClassifierFailure?: (verdict: ExternalDetectorVerdict) => void;
  /** Every verdict the classifier gave (not the ones reused from a call's cache). */
  onClassified?: (verdict: ExternalDetectorVerdict) => void;
  onDecision?: (agentId: string, outcome: Outcome, latencyMs: number) => void;
  onBackgroundError?: (e: unknown) => void;
  /**
   * GOV_LEDGER_DURABILITY=central: resolves once the central store acknowledged row `seq` of this ledger,
   * rejects (503) when it did not in time. Awaited after the commit of every call a policy rule of severity
   * `critical` matched; absent at the other levels.
   */
  awaitCentral?: (seq: number) => Promise<void>;
  /**
   * Why new work is refused outright, or null: the sidecar's replication backlog at its bound
   * (GOV_REPLICATION_MAX_BACKLOG_ROWS). Checked first by admission(), synchronously.
   */
  admissionRefusal?: () => Error | null;
}

/** A call a policy marks critical: one of its matched policy rules has severity `critical`. */
export function isCritical(result: EngineResult): boolean {
  return result.validation.failures.some((f) => f.check === 'policy' && f.severity === 'critical');
}

export interface RemoteClassifierPort {
  /** The text a call would send for this input ('' when there is nothing to classify). */
  textOf(input: EngineInput): string;
  classifyText(text: string): Promise<ExternalDetectorVerdict>;
}

/** The last text classified for one proxied call and its verdict, so a post-check over the same text reuses it. */
export interface ClassifierCache {
  text?: string;
  verdict?: ExternalDetectorVerdict;
}

/** A decision whose row is still committing; `committed` rejects if the ledger cannot take it. */
export interface Deferred<T> {
  response: T;
  committed: Promise<void>;
}

/** A decision whose row is appended when `record()` is first called; the promise is the row's commit. */
export interface Decided<T> {
  response: T;
  /** The first call's options hold: later calls return the same promise. */
  record(options?: AppendOptions): Promise<void>;
}

/** What a caller keeps of its own pre-check to post-check against it without reading the row back. */
export interface HeldPreCheck {
  request: PreCheckRequest;
  envelopeId: string;
  outcome: Outcome;
  /** The remote classifier's latest verdict within this call (the sidecar's guard-window probes use it). */
  classifier?: ClassifierCache;
  /** The historical reliability the pre-check decided with; its post-check and probes use the same. */
  reliability?: number | null;
}

function reusedId(envelopeId: string): AppError {
  return new AppError('conflict', `envelope ${envelopeId} already records another call (a different phase or agent)`);
}

const REVIEWED: ReadonlySet<Outcome> = new Set<Outcome>(['escalate', 'request_evidence']);

/** The validate-shaped answer every phase builds on; latency_ms is filled in when the row is appended. */
function scoredResponse(result: EngineResult, envelopeId: string): ValidateResponse {
  return {
    envelope_id: envelopeId,
    validation: result.validation,
    risk: result.risk,
    decision: result.decision,
    latency_ms: 0,
    trust_chain: null,
    governance_disclosure: result.governance_disclosure,
    confidence_rationale: result.confidence_rationale,
  };
}

/**
 * The governance service: engine + ledger + review queue + kill switch, independent of HTTP so that the
 * API routes and the sidecar proxy govern calls through the same code.
 */
export class Governor {
  /** Concurrent post-checks for one pre-check share one evaluation, so only one row is ever written. */
  private readonly postChecksInFlight = new Map<string, Promise<PostCheckResponse>>();

  /** Concurrent calls carrying one client-chosen envelope id share one evaluation, like post-checks. */
  private readonly clientIdsInFlight = new Map<string, { phase: Phase; agentId: string; answer: Promise<unknown> }>();

  private readonly agentStats: (agentId: string) => Promise<ReliabilityStats>;

  constructor(private readonly d: GovernorDeps) {
    this.agentStats = d.agentStats ?? ((agentId) => d.ledger.agentStats(agentId));
  }

  /**
   * Backpressure for new work: null while the ledger keeps up (the hot path allocates nothing), else a
   * promise that resolves once its backlog has drained, or rejects with LedgerUnavailableError after
   * `backpressureWaitMs`. A caller starting a call awaits it before deciding anything; the rows of calls
   * already started are never held back, so the ledger drops nothing.
   */
  admission(): Promise<void> | null {
    const refusal = this.d.admissionRefusal?.() ?? null;
    if (refusal !== null) return Promise.reject(refusal);
    const room = this.d.ledger.room?.() ?? null;
    if (room === null) return null;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new LedgerUnavailableError(`the audit ledger is behind: rows are waiting for its disk, and no room came within ${this.d.backpressureWaitMs} ms`)), this.d.backpressureWaitMs);
      void room.then(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /**
   * The agent's historical reliability, or null without that signal: then there is nothing to wait for,
   * and callers skip the await (the embedded and sidecar hot paths).
   */
  private reliabilityOf(agentId: string): Promise<number> | null {
    return this.d.useHistoricalReliability ? this.agentStats(agentId).then((s) => reliabilityFromStats(s)) : null;
  }

  /**
   * Validate. With a client-chosen `envelope_id` the ledger already holds, the stored decision is the answer
   * and nothing is written (idempotency: a client that lost an answer, or replays its buffer, sends again).
   */
  validate(req: ValidateRequest): Promise<ValidateResponse> {
    if (req.envelope_id === undefined) return this.runValidate(req);
    return this.once(req.envelope_id, 'validate', req.agent_id, () => this.runValidate(req));
  }

  /**
   * The answer to a call with a client-chosen envelope id: the stored one when the ledger holds the id,
   * else `run()`'s. An id stored for another phase or agent is a 409, not that call's decision: an id is
   * an idempotency key for one call, not a way to read someone else's row (docs/api.md, Idempotency).
   */
  private once<T>(envelopeId: string, phase: Phase, agentId: string, run: () => Promise<T>): Promise<T> {
    const inFlight = this.clientIdsInFlight.get(envelopeId);
    if (inFlight !== undefined) {
      if (inFlight.phase !== phase || inFlight.agentId !== agentId) return Promise.reject(reusedId(envelopeId));
      return inFlight.answer as Promise<T>;
    }
    const answer = (async () => {
      const stored = await this.storedAnswer<T>(envelopeId, phase, agentId);
      if (stored !== null) return stored;
      try {
        return await run();
      } catch (e) {
        // Another gateway on the same store wrote the id between our read and our commit.
        if (!(e instanceof LedgerConflictError && e.code === 'duplicate_envelope_id')) throw e;
        const again = await this.storedAnswer<T>(envelopeId, phase, agentId);
        if (again === null) throw e;
        return again;
      }
    })().finally(() => this.clientIdsInFlight.delete(envelopeId));
    this.clientIdsInFlight.set(envelopeId, { phase, agentId, answer });
    return answer;
  }

  private async storedAnswer<T>(envelopeId: string, phase: Phase, agentId: string): Promise<T | null> {
    const row = await this.d.ledger.get(envelopeId);
    if (row === null) return null;
    if (row.phase !== phase || row.agent_id !== agentId) throw reusedId(envelopeId);
    const payload = row.payload as StoredPayload | null;
    if (!payload?.response) throw new AppError('conflict', `envelope ${envelopeId} is already recorded, but its payload has been erased`);
    return payload.response as T;
  }

  /**
   * The row's timestamp for a call made at `timestamp` (a client's buffered call): within
   * CLIENT_TIMESTAMP_MAX_AGE_MS behind this gateway's clock and CLIENT_TIMESTAMP_MAX_SKEW_MS ahead, else 422.
   */
  private callTime(timestamp: string | undefined): Date | undefined {
    if (timestamp === undefined) return undefined;
    const at = Date.parse(timestamp);
    const now = this.d.clock().getTime();
    let problem: string | null = null;
    if (Number.isNaN(at)) problem = 'expected an ISO 8601 date-time';
    else if (at > now + CLIENT_TIMESTAMP_MAX_SKEW_MS) problem = `more than ${CLIENT_TIMESTAMP_MAX_SKEW_MS / 60_000} minutes ahead of the gateway's clock`;
    else if (at < now - CLIENT_TIMESTAMP_MAX_AGE_MS) problem = `more than ${CLIENT_TIMESTAMP_MAX_AGE_MS / 3_600_000} hours behind the gateway's clock`;
    if (problem !== null) throw new AppError('validation_failed', `timestamp: ${problem}`, { issues: [{ path: 'body.timestamp', message: problem }] });
    return new Date(at);
  }

  private async runValidate(req: ValidateRequest): Promise<ValidateResponse> {
    const at = this.callTime(req.timestamp);
    const wait = this.admission();
    if (wait !== null) await wait;
    const started = performance.now();
    const input = fromValidate(req);
    const external = this.d.classifier ? await this.classify(input) : null;
    const reading = this.reliabilityOf(input.agent_id);
    const { result, envelopeId, timestamp } = this.decide(input, external, reading === null ? null : await reading, { envelopeId: req.envelope_id, timestamp: at });
    const response: ValidateResponse = scoredResponse(result, envelopeId);
    await this.persist('validate', input, result, envelopeId, timestamp, null, req, response, started, undefined, external);
    return response;
  }

  /** True when a remote classifier is configured: callers then await classify() before deciding. */
  get classifies(): boolean {
    return this.d.classifier != null;
  }

  /**
   * The remote classifier's verdict on this input's text (null without a classifier). With a cache, the
   * same text as last time reuses that verdict instead of asking again.
   */
  async classify(input: EngineInput, cache?: ClassifierCache): Promise<ExternalDetectorVerdict | null> {
    const c = this.d.classifier;
    if (!c) return null;
    const text = c.textOf(input);
    if (cache?.verdict !== undefined && cache.text === text) return cache.verdict;
    const verdict = await c.classifyText(text);
    if (cache !== undefined) {
      cache.text = text;
      cache.verdict = verdict;
    }
    this.d.onClassified?.(verdict);
    if (verdict.status === 'timeout' || verdict.status === 'error') this.d.onClassifierFailure?.(verdict);
    return verdict;
  }

  /**
   * classify() for a post-check of a held pre-check, through that call's cache. It reads everything the
   * model read in the call: the input, the tool results and the pre-check's context with the post-check's,
   * so a post-check that adds nothing new to read sends the pre-check's text again, which the cache answers.
   */
  classifyPost(pre: HeldPreCheck, req: PostCheckRequest): Promise<ExternalDetectorVerdict | null> {
    const input = fromPostCheck(pre.request, req, pre.envelopeId);
    const read: EngineInput = { ...input, context: [...(pre.request.context ?? []), ...input.context] };
    return this.classify(read, (pre.classifier ??= {}));
  }

  /** Pre-check; a client-chosen `envelope_id` makes it idempotent as validate() is. */
  preCheck(req: PreCheckRequest): Promise<PreCheckResponse> {
    if (req.envelope_id === undefined) return this.runPreCheck(req);
    return this.once(req.envelope_id, 'pre_check', req.agent_id, () => this.runPreCheck(req));
  }

  private async runPreCheck(req: PreCheckRequest): Promise<PreCheckResponse> {
    this.callTime(req.timestamp);
    const wait = this.admission();
    if (wait !== null) await wait;
    const started = performance.now();
    const external = this.d.classifier ? await this.classify(fromPreCheck(req)) : null;
    const reading = this.reliabilityOf(req.agent_id);
    const decided = this.preCheckDecided(req, external, started, reading === null ? null : await reading);
    await decided.record();
    return decided.response;
  }

  postCheck(req: PostCheckRequest): Promise<PostCheckResponse> {
    const preId = req.pre_check_envelope_id;
    const inFlight = this.postChecksInFlight.get(preId);
    if (inFlight) return inFlight;
    const p = this.runPostCheck(req).finally(() => this.postChecksInFlight.delete(preId));
    this.postChecksInFlight.set(preId, p);
    return p;
  }

  private async runPostCheck(req: PostCheckRequest): Promise<PostCheckResponse> {
    const preId = req.pre_check_envelope_id;
    const pre = await this.d.ledger.get(preId);
    if (pre === null || pre.phase !== 'pre_check') throw new AppError('not_found', `no pre-check with envelope id ${preId}`);
    const existing = await this.d.ledger.postCheckOf(preId);
    if (existing !== null) {
      const row = await this.d.ledger.get(existing);
      const payload = row?.payload as StoredPayload | null | undefined;
      if (payload?.response) return payload.response as PostCheckResponse;
      throw new AppError('conflict', `the post-check of ${preId} was already recorded, but its payload has been erased`);
    }
    const prePayload = pre.payload as StoredPayload | null;
    if (prePayload === null) throw new AppError('conflict', `the payload of pre-check ${preId} has been erased`);
    const held: HeldPreCheck = { request: prePayload.request as PreCheckRequest, envelopeId: preId, outcome: pre.decision };
    const started = performance.now();
    const reading = this.reliabilityOf(held.request.agent_id);
    if (reading !== null) held.reliability = await reading;
    const external = this.d.classifier ? await this.classifyPost(held, req) : null;
    const deferred = this.postCheckDeferred(held, req, external, started);
    await deferred.committed;
    return deferred.response;
  }

  /**
   * Pre-check for a caller that holds the request itself (the sidecar): the decision is returned at once
   * and its row is appended when the caller calls `record()` (once; later calls return the same promise).
   * The sidecar forwards a cleared LLM call and records the pre-check together with its post-check, so
   * both rows share one ledger commit; it records at once when it refuses or when the call has side
   * effects. Whoever answers a client must await the row first. `reliability`: the agent's historical
   * reliability where that signal is on (preCheck() reads it first); the sidecar has none.
   */
  preCheckDecided(req: PreCheckRequest, external: ExternalDetectorVerdict | null = null, started = performance.now(), reliability: number | null = null): Decided<PreCheckResponse> {
    const input = fromPreCheck(req);
    const { result, envelopeId, timestamp } = this.decide(input, external, reliability, { envelopeId: req.envelope_id, timestamp: this.callTime(req.timestamp) });
    // Built directly (not scoredResponse() less two fields): one object per call instead of two.
    const response: PreCheckResponse = {
      envelope_id: envelopeId,
      validation: result.validation,
      risk: result.risk,
      decision: result.decision,
      latency_ms: 0,
      governance_disclosure: result.governance_disclosure,
    };
    let committed: Promise<void> | null = null;
    return {
      response,
      record: (options) => (committed ??= this.persist('pre_check', input, result, envelopeId, timestamp, null, req, response, started, options, external)),
    };
  }

  /**
   * Post-check of a pre-check whose request and outcome the caller still holds, so the pre-check row is not
   * read back (it may still be committing: the ledger appends in call order, so this row lands after it).
   * Exactly one post-check per pre-check is the caller's duty; the sidecar makes one per proxied call.
   */
  postCheckDeferred(pre: HeldPreCheck, req: PostCheckRequest, external: ExternalDetectorVerdict | null = null, started = performance.now()): Deferred<PostCheckResponse> {
    const input = fromPostCheck(pre.request, req, pre.envelopeId);
    const decided = this.decide(input, external, pre.reliability ?? null, { timestamp: this.callTime(req.timestamp) });
    const { envelopeId, timestamp } = decided;
    const result = holdBlockedPreCheck(pre.outcome, pre.envelopeId, decided.result);
    const response: PostCheckResponse = scoredResponse(result, envelopeId) as PostCheckResponse;
    response.pre_check_envelope_id = pre.envelopeId;
    const committed = this.persist('post_check', input, result, envelopeId, timestamp, pre.envelopeId, req, response, started, undefined, external);
    return { response, committed };
  }

  /**
   * The engine's verdict on a draft output, with no row and no review push: the streaming guard window
   * checks partial output with it and records only the final post-check.
   */
  probe(pre: HeldPreCheck, req: PostCheckRequest, external?: ExternalDetectorVerdict | null): EngineResult {
    // Without a fresh verdict the call's latest one stands: a guard-window probe never waits on the network.
    return this.evaluateInput(fromPostCheck(pre.request, req, pre.envelopeId), undefined, external ?? pre.classifier?.verdict ?? null, pre.reliability ?? null);
  }

  /** Re-runs today's engine on a stored envelope; writes a new `decision` row linked to the original. */
  async rerun(envelopeId: string): Promise<DecisionRerunResponse> {
    const started = performance.now();
    let row = await this.d.ledger.get(envelopeId);
    if (row === null) throw new AppError('not_found', `no envelope with id ${envelopeId}`);
    // A re-run of a re-run re-decides the original execution.
    if (row.phase === 'decision' && row.parent_envelope_id) row = await this.d.ledger.get(row.parent_envelope_id);
    if (row === null) throw new AppError('not_found', `the original of envelope ${envelopeId} is missing`);
    if (row.phase === 'policy') throw new AppError('conflict', `envelope ${row.envelope_id} records a policy change, not a decision`);
    const pre = row.phase === 'post_check' && row.parent_envelope_id !== null && row.payload !== null ? await this.d.ledger.get(row.parent_envelope_id) : null;
    const stored = storedEngineInput(row, pre?.payload ?? null);
    if (!stored.ok) throw new AppError('conflict', stored.message);
    const input = stored.input;
    const reading = this.reliabilityOf(input.agent_id);
    // A re-run decides on the verdict the call had, without asking the classifier again.
    const decided = this.decide(input, stored.external_detector, reading === null ? null : await reading);
    const response: DecisionRerunResponse = { ...scoredResponse(decided.result, decided.envelopeId), original_envelope_id: row.envelope_id };
    await this.persist('decision', input, decided.result, decided.envelopeId, decided.timestamp, row.envelope_id, { rerun_of: row.envelope_id }, response, started);
    return response;
  }

  /**
   * The engine's verdict on an execution or a proposed action with the rules in force, and those rules:
   * no row, no review push, no decision counted (the policy API's dry run).
   */
  async dryRun(input: EngineInput, policies?: PolicySet): Promise<{ result: EngineResult; policies: RuleSet['policies'] }> {
    const reading = this.reliabilityOf(input.agent_id);
    const reliability = reading === null ? null : await reading;
    return { result: this.evaluateInput(input, policies, null, reliability), policies: policies ?? this.d.rules().policies };
  }

  /**
   * `policies`: another set than the active one (a dry run against a named, possibly inactive, version).
   * `reliability`: what reliabilityOf() read, null without the signal.
   */
  private evaluateInput(input: EngineInput, policies: PolicySet | undefined, external: ExternalDetectorVerdict | null, reliability: number | null): EngineResult {
    const rules = this.d.rules();
    return evaluate(input, {
      manifest: this.d.manifests.get(input.agent_id),
      outputSchema: this.d.manifests.outputSchema(input.agent_id),
      policies: policies ?? rules.policies,
      golden: rules.golden,
      config: rules.config,
      reliability,
      killSwitch: this.d.killSwitch.view(),
      judgeScore: null,
      externalDetector: external,
    });
  }

  /** `given`: the envelope id and call time a client chose (a buffered call replayed), else new ones. */
  private decide(input: EngineInput, external: ExternalDetectorVerdict | null, reliability: number | null, given: { envelopeId?: string; timestamp?: Date } = {}): { result: EngineResult; envelopeId: string; timestamp: Date } {
    const result = this.evaluateInput(input, undefined, external, reliability);
    const now = this.d.clock();
    if (REVIEWED.has(result.decision.outcome)) {
      // From now, not from a buffered call's own time: reviewers learn of it only now.
      result.decision.review_deadline = new Date(now.getTime() + this.d.reviewSlaMinutes * 60_000).toISOString();
    }
    // Time-ordered (v7) ids keep the envelope index append-mostly: measured ~1.15x ledger throughput.
    return { result, envelopeId: given.envelopeId ?? newEnvelopeId(), timestamp: given.timestamp ?? now };
  }

  /** Appends the row and waits for its commit: the caller must not answer before this resolves. */
  private async persist(
    phase: Phase,
    input: EngineInput,
    result: EngineResult,
    envelopeId: string,
    timestamp: Date,
    parent: string | null,
    request: unknown,
    response: { latency_ms: number },
    started: number,
    options?: AppendOptions,
    external: ExternalDetectorVerdict | null = null,
  ): Promise<void> {
    const iso = timestamp.toISOString();
    response.latency_ms = Math.round((performance.now() - started) * 1000) / 1000;
    const row = await this.d.ledger.append({
      envelope_id: envelopeId,
      phase,
      agent_id: input.agent_id,
      decision: result.decision.outcome,
      risk_tier: result.risk.tier,
      confidence: result.validation.final_confidence,
      timestamp: iso,
      parent_envelope_id: parent ?? input.parent_envelope_id ?? null,
      policy_version: result.decision.policy_version,
      score_version: result.decision.score_version,
      // Masked first, so the context digests and the bounded strings commit to the masked text.
      payload: (external === null
        ? { request: boundPayload(digestContext(maskPayload(request, result.masks)), this.d.maxStoredTextChars), response }
        : { request: boundPayload(digestContext(maskPayload(request, result.masks)), this.d.maxStoredTextChars), response, external_detector: external }) satisfies StoredPayload,
    }, options);
    const outcome = result.decision.outcome;
    this.d.onDecision?.(input.agent_id, outcome, performance.now() - started);
    if (REVIEWED.has(outcome)) {
      this.d.reviewQueue.push(
        {
          envelope_id: envelopeId,
          agent_id: input.agent_id,
          outcome,
          reason: result.decision.reason,
          status: 'open',
          created_at: iso,
          review_deadline: result.decision.review_deadline ?? iso,
        },
        (e) => this.d.onBackgroundError?.(e),
      );
    }
    // Last: the row is committed and its review item queued whatever the central store answers.
    if (this.d.awaitCentral !== undefined && isCritical(result)) await this.d.awaitCentral(row.seq);
  }
}
