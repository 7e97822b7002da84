import type { z } from 'zod';
import type { Outcome } from '../contracts/common.js';
import { GatewayRequestError, GatewayUnavailableError, LOCAL_ENVELOPE_ID } from '../contracts/client-errors.js';
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
import { resolveClientSettings, SDK_VERSION, type ClientSettings, type GovClientOptions } from './client-settings.js';
import { HttpTransport } from './http-transport.js';

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

  constructor(options: GovClientOptions = {}, internal?: { onClose?: () => Promise<void>; transport?: Partial<ConstructorParameters<typeof HttpTransport>[0]> }) {
    this.settings = resolveClientSettings(options);
    const t = this.settings.target;
    // A disabled client builds nothing that could open a socket or start a timer.
    this.transport = !this.settings.enabled || t.kind !== 'http'
      ? null
      : new HttpTransport({ url: t.url, apiKey: this.settings.apiKey, timeoutMs: this.settings.timeoutMs, retries: this.settings.retries, maxRetryAfterMs: this.settings.maxRetryAfterMs, ...internal?.transport });
    this.onClose = internal?.onClose ?? null;
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
    await this.onClose?.();
  }

  /**
   * One governance call with the failure mode left to the caller: the wrapper decides differently from
   * the direct methods. Local decisions (disabled, env kill switch, OSS) never touch the network.
   */
  async send<P extends Phase>(phase: P, req: PhaseTypes[P]['in']): Promise<PhaseTypes[P]['out']> {
    const s = this.settings;
    if (!s.enabled) return this.local(phase, req, 'approve', 'governance disabled (GOV_ENABLED=false)');
    if (s.killSwitch) return this.local(phase, req, 'block', ENV_KILL_SWITCH_REASON);
    if (this.transport === null) {
      const parsed = REQUESTS[phase].safeParse(req);
      if (!parsed.success) {
        throw new GatewayRequestError(422, 'validation_failed', `OSS mode: the ${phase.replace('_', '-')} request does not match its schema: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`, { issues: parsed.error.issues });
      }
      return this.local(phase, req, 'approve', 'OSS mode: the request matches its schema; no gateway is configured (GOV_GATEWAY_URL, GOV_API_KEY)');
    }
    const body = 'sdk_version' in req && req.sdk_version !== undefined ? req : { ...req, sdk_version: SDK_VERSION };
    // The limiter buckets by this header, not by the body's agent_id (spec, Limits rule 2).
    const agentId = 'agent_id' in req && typeof req.agent_id === 'string' ? { 'x-agent-id': req.agent_id } : undefined;
    const answer = await this.transport.call('POST', PATHS[phase], body, agentId);
    return RESPONSES[phase].parse(answer) as PhaseTypes[P]['out'];
  }

  /** A decision made without a gateway, in the phase's response shape. */
  local<P extends Phase>(phase: P, req: PhaseTypes[P]['in'], outcome: Outcome, reason: string): PhaseTypes[P]['out'] {
    const r = localResponse(outcome, reason);
    if (phase === 'pre_check') {
      const { trust_chain: _t, ...pre } = r;
      return pre as PhaseTypes[P]['out'];
    }
    if (phase === 'post_check') return { ...r, pre_check_envelope_id: (req as PostCheckInput).pre_check_envelope_id } as PhaseTypes[P]['out'];
    return r as PhaseTypes[P]['out'];
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
