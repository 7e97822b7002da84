import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import type { Outcome } from '../contracts/common.js';
import { GatewayRequestError, GatewayUnavailableError, GatewayVersionError, LOCAL_ENVELOPE_ID } from '../contracts/client-errors.js';
import {
  KillSwitchState,
  PostCheckRequest,
  PostCheckResponse,
  PreCheckRequest,
  PreCheckResponse,
  ValidateRequest,
  ValidateResponse,
  type KillSwitchSet,
} from '../contracts/runtime.js';
import { ClientSettingsError, resolveClientSettings, SDK_VERSION, type ClientSettings, type GovClientOptions } from './client-settings.js';
import { createHash } from 'node:crypto';

/** Tells keys apart without keeping one in a comparable string in memory longer than needed. */
function createKeyTag(apiKey: string | null): string {
  return apiKey === null ? 'none' : createHash('sha256').update(apiKey).digest('hex').slice(0, 16);
}
import { HttpTransport } from './http-transport.js';
import { DurableQueue, type QueueEntry, type ReplayResult } from './durable-queue.js';

/**
 * One DurableQueue per directory in this process: every wrapper builds its own GovClient, and they share the
 * default directory. `gateway` names where its entries go, so that two clients of different gateways cannot
 * replay each other's entries; the first client's transport replays on the timer.
 */
interface SharedQueue {
  queue: DurableQueue;
  gateway: string;
  clients: number;
  timer: NodeJS.Timeout | null;
}
const queues = new Map<string, SharedQueue>();

/** What a caller writes: the contract's input side, so that fields with defaults may be left out. */
export type ValidateInput = z.input<typeof ValidateRequest>;
export type PreCheckInput = z.input<typeof PreCheckRequest>;
export type PostCheckInput = z.input<typeof PostCheckRequest>;
export type { KillSwitchSet, KillSwitchState, PostCheckResponse, PreCheckResponse, ValidateResponse };

/** Why a response was made up by the client rather than decided by a gateway. */
export type LocalReason = 'disabled' | 'env_kill_switch' | 'oss' | 'fail_open';

export const ENV_KILL_SWITCH_REASON = 'blocked by the environment kill switch (GOV_KILL_SWITCH=1) before any call to the gateway';

/**
 * A decision the client made without a gateway. It carries LOCAL_ENVELOPE_ID, no scores (`validation`
 * and `risk` are absent, as for a Free-tier caller) and names itself in `governance_disclosure`.
 */
function localResponse(outcome: Outcome, reason: string): ValidateResponse {
  return {
    envelope_id: LOCAL_ENVELOPE_ID,
    decision: { outcome, reason, policy_version: 'local', score_version: 'local', reviewer_id: null, review_deadline: null, judge_latency_ms: null },
    latency_ms: 0,
    trust_chain: null,
    governance_disclosure: `Not evaluated by a governance gateway: ${reason}`,
  };
}

/** Whether a response was made up by the client (see LOCAL_ENVELOPE_ID) rather than recorded by a gateway. */
export function isLocalDecision(r: { envelope_id: string }): boolean {
  return r.envelope_id === LOCAL_ENVELOPE_ID;
}

type Phase = 'validate' | 'pre_check' | 'post_check';

const PATHS: Record<Phase, string> = {
  validate: '/v1/runtime/validate',
  pre_check: '/v1/runtime/pre-check',
  post_check: '/v1/runtime/post-check',
};

const REQUESTS = { validate: ValidateRequest, pre_check: PreCheckRequest, post_check: PostCheckRequest } as const;
const RESPONSES = { validate: ValidateResponse, pre_check: PreCheckResponse, post_check: PostCheckResponse } as const;

interface PhaseTypes {
  validate: { in: ValidateInput; out: ValidateResponse };
  pre_check: { in: PreCheckInput; out: PreCheckResponse };
  post_check: { in: PostCheckInput; out: PostCheckResponse };
}

export type { Phase, PhaseTypes };

/** A decision made without a gateway, in the phase's response shape. */
export function localDecision<P extends Phase>(phase: P, req: PhaseTypes[P]['in'], outcome: Outcome, reason: string): PhaseTypes[P]['out'] {
  const r = localResponse(outcome, reason);
  if (phase === 'pre_check') {
    const { trust_chain: _t, ...pre } = r;
    return pre as PhaseTypes[P]['out'];
  }
  if (phase === 'post_check') return { ...r, pre_check_envelope_id: (req as PostCheckInput).pre_check_envelope_id } as PhaseTypes[P]['out'];
  return r as PhaseTypes[P]['out'];
}

/**
 * The part of a governance call that needs no gateway (disabled, environment kill switch, OSS mode's schema
 * check): its decision, or null when the call must go to the gateway. Synchronous, so that the synchronous
 * wrapper path (sync-bridge.ts) decides these in the caller's thread without a worker, as send() does.
 */
export function localSend<P extends Phase>(s: ClientSettings, phase: P, req: PhaseTypes[P]['in']): PhaseTypes[P]['out'] | null {
  if (!s.enabled) return localDecision(phase, req, 'approve', 'governance disabled (GOV_ENABLED=false)');
  if (s.killSwitch) return localDecision(phase, req, 'block', ENV_KILL_SWITCH_REASON);
  if (s.target.kind !== 'oss') return null;
  const parsed = REQUESTS[phase].safeParse(req);
  if (!parsed.success) {
    throw new GatewayRequestError(422, 'validation_failed', `OSS mode: the ${phase.replace('_', '-')} request does not match its schema: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`, { issues: parsed.error.issues });
  }
  return localDecision(phase, req, 'approve', 'OSS mode: the request matches its schema; no gateway is configured (GOV_GATEWAY_URL, GOV_API_KEY)');
}

/**
 * The direct client: one method per runtime endpoint, typed by the server's own zod contracts
 * (src/contracts/runtime.ts). Settings come from the options, then the environment (client-settings.ts).
 *
 * Failure modes on the direct methods (spec, "Client wrapper behaviour"): under `closed` an unreachable
 * gateway raises GatewayUnavailableError; under `open` it is a warning and the method returns a local
 * `pending` decision (isLocalDecision() tells it apart). Every other refusal raises: 426 as
 * GatewayVersionError, the other 4xx as GatewayRequestError.
 */
export class GovClient {
  readonly settings: ClientSettings;
  private readonly transport: HttpTransport | null;
  private readonly onClose: (() => Promise<void>) | null;
  private readonly shared: SharedQueue | null = null;
  private closed = false;

  constructor(options: GovClientOptions = {}, internal?: { onClose?: () => Promise<void>; transport?: Partial<ConstructorParameters<typeof HttpTransport>[0]> }) {
    this.settings = resolveClientSettings(options);
    const t = this.settings.target;
    // A disabled client builds nothing that could open a socket or start a timer.
    this.transport = !this.settings.enabled || t.kind !== 'http'
      ? null
      : new HttpTransport({ url: t.url, apiKey: this.settings.apiKey, timeoutMs: this.settings.timeoutMs, retries: this.settings.retries, maxRetryAfterMs: this.settings.maxRetryAfterMs, ...internal?.transport });
    this.onClose = internal?.onClose ?? null;
    if (this.transport !== null && this.settings.queue !== null) this.shared = this.openQueue(this.transport);
  }

  /** Failure mode `queue`: this process's queue of the configured directory, opened (and locked) on first use. */
  private openQueue(transport: HttpTransport): SharedQueue {
    const q = this.settings.queue!;
    const gateway = `${transport.url} ${createKeyTag(this.settings.apiKey)}`;
    let shared = queues.get(q.dir);
    if (shared !== undefined) {
      if (shared.gateway !== gateway) {
        throw new ClientSettingsError(`GOV_QUEUE_DIR: ${q.dir} already queues calls for another gateway or key in this process; give this client its own queueDir`);
      }
    } else {
      shared = { queue: new DurableQueue(q.dir, { maxEntries: q.maxEntries, maxBytes: q.maxBytes }, (m) => this.settings.onWarning(m)), gateway, clients: 0, timer: null };
      queues.set(q.dir, shared);
      if (q.replayIntervalMs > 0) {
        const s = shared;
        // Unreferenced: a queue waiting for its gateway never keeps the host process alive.
        s.timer = setInterval(() => {
          if (s.queue.size > 0) void this.replayQueue().catch((e) => this.settings.onWarning('queue replay failed', e));
        }, q.replayIntervalMs).unref();
      }
    }
    shared.clients++;
    return shared;
  }

  /** Entries waiting in this client's queue (failure mode `queue`), else 0. */
  get queued(): number {
    return this.shared?.queue.size ?? 0;
  }

  /**
   * Replays the queue now (the timer and the next call do it too). True when it is empty afterwards; false
   * when the gateway is still unreachable (or refuses this client's key or version: the entries stay).
   */
  replayQueue(): Promise<boolean> {
    if (this.shared === null) return Promise.resolve(true);
    return this.shared.queue.drain((e) => this.replayOne(e));
  }

  private async replayOne(entry: QueueEntry): Promise<ReplayResult> {
    const body = { ...entry.body, timestamp: entry.timestamp };
    let answer: unknown;
    try {
      answer = await this.transport!.call('POST', PATHS[entry.phase], body, entry.agent_id === null ? undefined : { 'x-agent-id': entry.agent_id });
    } catch (e) {
      if (e instanceof GatewayUnavailableError) return 'unavailable';
      // Refusals of this client rather than of the entry: kept until the key or the version is mended.
      if (e instanceof GatewayVersionError || (e instanceof GatewayRequestError && (e.status === 401 || e.status === 402 || e.status === 403))) {
        this.settings.onWarning(`queue replay stopped: the gateway refuses this client (${e instanceof GatewayRequestError ? e.status : 426}); ${this.queued} entries kept`, e);
        return 'unavailable';
      }
      if (e instanceof GatewayRequestError) {
        this.settings.onWarning(`queued ${entry.phase.replace('_', '-')} ${entry.envelope_id ?? ''} refused by the gateway (${e.status} ${e.code ?? ''}); moved to rejected.jsonl`.replace(/\s+/g, ' '));
        return { rejected: `${e.status} ${e.code ?? 'error'}: ${e.message}` };
      }
      throw e;
    }
    const parsed = RESPONSES[entry.phase].safeParse(answer);
    // Recorded either way: the gateway answered 2xx. Only the hook needs the shape.
    if (parsed.success) this.settings.onReplay?.(entry.phase, parsed.data);
    return 'acked';
  }

  /**
   * A client on an embedded gateway started in this process (startEmbeddedGateway): zero configuration.
   * The gateway closes with the client. Loaded on demand, so importing the client never loads the server.
   */
  static async embedded(options: GovClientOptions & { port?: number; db?: string; token?: string } = {}): Promise<GovClient> {
    const { startEmbeddedGateway } = await import('./embedded-gateway.js');
    const { port, db, token, ...clientOptions } = options;
    const gw = await startEmbeddedGateway({ port, db, token, env: options.env });
    return new GovClient({ ...clientOptions, gatewayUrl: gw.url, apiKey: gw.token }, { onClose: () => gw.close() });
  }

  /** OSS mode: no gateway address and no key, so every call is checked against the schemas in process. */
  get isOss(): boolean {
    return this.settings.target.kind === 'oss';
  }

  validate(req: ValidateInput): Promise<ValidateResponse> {
    return this.direct('validate', req);
  }

  preCheck(req: PreCheckInput): Promise<PreCheckResponse> {
    return this.direct('pre_check', req);
  }

  postCheck(req: PostCheckInput): Promise<PostCheckResponse> {
    return this.direct('post_check', req);
  }

  /** Reads the global kill switch, or sets it when given `{active, reason?}` (needs tier team). */
  async killSwitch(set?: KillSwitchSet): Promise<KillSwitchState> {
    const s = this.settings;
    if (s.killSwitch) return { active: true, reason: ENV_KILL_SWITCH_REASON, source: 'env', updated_at: null };
    if (this.transport === null) {
      if (set !== undefined) throw new GatewayRequestError(409, 'conflict', `there is no gateway whose kill switch could be set (${s.enabled ? 'OSS mode' : 'governance disabled'})`);
      return { active: false, reason: null, source: 'env', updated_at: null };
    }
    const body = set === undefined ? await this.transport.call('GET', '/v1/runtime/kill-switch') : await this.transport.call('POST', '/v1/runtime/kill-switch', set);
    return KillSwitchState.parse(body);
  }

  /** Closes what the client owns: the embedded gateway of GovClient.embedded(); nothing otherwise. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const shared = this.shared;
    if (shared !== null && --shared.clients === 0) {
      if (shared.timer !== null) clearInterval(shared.timer);
      queues.delete(shared.queue.dir);
      await shared.queue.close();
    }
    await this.onClose?.();
  }

  /**
   * One governance call with the failure mode left to the caller: the wrapper decides differently from
   * the direct methods. Local decisions (disabled, env kill switch, OSS) never touch the network.
   */
  async send<P extends Phase>(phase: P, req: PhaseTypes[P]['in']): Promise<PhaseTypes[P]['out']> {
    const s = this.settings;
    const decided = localSend(s, phase, req);
    if (decided !== null) return decided;
    if (this.transport === null) throw new Error('unreachable: a client without a transport decides locally');
    const body = 'sdk_version' in req && req.sdk_version !== undefined ? req : { ...req, sdk_version: SDK_VERSION };
    // The limiter buckets by this header, not by the body's agent_id (spec, Limits rule 2).
    const agentId = 'agent_id' in req && typeof req.agent_id === 'string' ? { 'x-agent-id': req.agent_id } : undefined;
    if (this.shared !== null) return this.sendOrQueue(phase, body as PhaseTypes[P]['in'], agentId);
    const answer = await this.transport.call('POST', PATHS[phase], body, agentId);
    return RESPONSES[phase].parse(answer) as PhaseTypes[P]['out'];
  }

  /**
   * Failure mode `queue`. Every validate and pre-check carries an envelope id chosen here, so that a retry
   * after a lost answer and a replay are both idempotent. Entries already queued go first (a queued
   * pre-check must reach the gateway before its post-check does); when they cannot, this call is queued
   * behind them without trying, and answered with a local `pending` decision carrying its envelope id.
   */
  private async sendOrQueue<P extends Phase>(phase: P, req: PhaseTypes[P]['in'], agentHeader: Record<string, string> | undefined): Promise<PhaseTypes[P]['out']> {
    const at = new Date().toISOString();
    const body = (phase !== 'post_check' && (req as { envelope_id?: string }).envelope_id === undefined ? { ...req, envelope_id: randomUUID() } : req) as Record<string, unknown>;
    const queue = this.shared!.queue;
    let cause: unknown = null;
    if (queue.size === 0 || (await this.replayQueue())) {
      try {
        const answer = await this.transport!.call('POST', PATHS[phase], body, agentHeader);
        return RESPONSES[phase].parse(answer) as PhaseTypes[P]['out'];
      } catch (e) {
        if (!(e instanceof GatewayUnavailableError)) throw e;
        cause = e;
      }
    }
    const envelopeId = phase === 'post_check' ? null : (body.envelope_id as string);
    await queue.append({ phase, envelope_id: envelopeId, timestamp: at, agent_id: agentHeader?.['x-agent-id'] ?? null, body });
    this.settings.onWarning(`gateway unavailable, ${phase.replace('_', '-')} queued for replay (${queue.size} waiting in ${queue.dir})`, cause ?? undefined);
    const reason = `gateway unavailable (failure mode queue): the call is queued and will be recorded when the gateway returns`;
    const r = this.local(phase, req, 'pending', reason);
    return envelopeId === null ? r : { ...r, envelope_id: envelopeId };
  }

  /** A decision made without a gateway, in the phase's response shape. */
  local<P extends Phase>(phase: P, req: PhaseTypes[P]['in'], outcome: Outcome, reason: string): PhaseTypes[P]['out'] {
    return localDecision(phase, req, outcome, reason);
  }

  private async direct<P extends Phase>(phase: P, req: PhaseTypes[P]['in']): Promise<PhaseTypes[P]['out']> {
    try {
      return await this.send(phase, req);
    } catch (e) {
      if (!(e instanceof GatewayUnavailableError) || this.settings.failureMode === 'closed') throw e;
      this.settings.onWarning(`gateway unavailable, ${phase.replace('_', '-')} not governed (failure mode ${this.settings.failureMode})`, e);
      return this.local(phase, req, 'pending', `gateway unavailable (failure mode ${this.settings.failureMode}): ${e.message}`);
    }
  }
}
