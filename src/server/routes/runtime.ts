import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import semver from 'semver';
import {
  DecisionRerunResponse,
  EnvelopeParams,
  KillSwitchSet,
  KillSwitchState,
  PostCheckRequest,
  PostCheckResponse,
  PreCheckRequest,
  PreCheckResponse,
  ValidateRequest,
  ValidateResponse,
} from '../../contracts/runtime.js';
import { z } from 'zod';
import { AppError } from '../app-error.js';
import { checkCapability } from '../capabilities.js';
import type { AppDeps } from '../app.js';
import { responseForTier } from '../score-view.js';

/** Spec 426 rule: a request whose sdk_version is a lower semver than GOV_MIN_SDK_VERSION; no sdk_version passes. */
export function assertSdkVersion(sdkVersion: string | undefined, minimum: string | null): void {
  if (minimum === null || sdkVersion === undefined) return;
  const v = semver.coerce(sdkVersion);
  if (v === null) throw new AppError('validation_failed', 'sdk_version is not a semantic version', { issues: [{ path: 'body.sdk_version', message: 'expected a version such as 1.2.0' }] });
  if (semver.lt(v, minimum)) {
    throw new AppError('upgrade_required', `client library ${sdkVersion} is too old; the minimum supported sdk_version is ${minimum}`, { minimum_sdk_version: minimum, sdk_version: sdkVersion });
  }
}

export const runtimeRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  const { governor, settings } = deps;

  /** The steps every governed call shares around its governor method: version gate, log fields, tier view. */
  const governed = async <R extends { decision: { outcome: string }; validation?: unknown; risk?: unknown; confidence_rationale?: string }>(
    req: FastifyRequest,
    body: { sdk_version?: string; agent_id?: string },
    run: () => Promise<R>,
  ): Promise<R> => {
    if (body.agent_id !== undefined) req.govAgentId = body.agent_id;
    assertSdkVersion(body.sdk_version, settings.minSdkVersion);
    const res = await run();
    req.govOutcome = res.decision.outcome;
    return responseForTier(res, req.principal);
  };

  app.post('/v1/runtime/validate', {
    config: { capability: 'runtime.govern', rateLimit: 'validate' },
    schema: { tags: ['runtime'], summary: 'Single-shot validation of an agent execution', body: ValidateRequest, response: { 200: ValidateResponse } },
  }, async (req) => governed(req, req.body, () => governor.validate(req.body)));

  app.post('/v1/runtime/pre-check', {
    config: { capability: 'runtime.govern' },
    schema: { tags: ['runtime'], summary: 'Gate a proposed action before execution', body: PreCheckRequest, response: { 200: PreCheckResponse } },
  }, async (req) => governed(req, req.body, () => governor.preCheck(req.body)));

  app.post('/v1/runtime/post-check', {
    config: { capability: 'runtime.govern' },
    schema: { tags: ['runtime'], summary: 'Score the real output of a pre-checked call', body: PostCheckRequest, response: { 200: PostCheckResponse } },
  }, async (req) => governed(req, req.body, () => governor.postCheck(req.body)));

  app.get('/v1/runtime/kill-switch', {
    config: { capability: 'kill_switch.read' },
    schema: { tags: ['runtime'], summary: 'Read the global kill switch', response: { 200: KillSwitchState } },
  }, async () => deps.killSwitch.state());

  app.post('/v1/runtime/kill-switch', {
    config: { capability: 'kill_switch.write' },
    schema: { tags: ['runtime'], summary: 'Set or clear the global kill switch', body: KillSwitchSet, response: { 200: KillSwitchState } },
  }, async (req) => {
    const state = await deps.killSwitch.set(req.body.active, req.body.reason, deps.clock());
    req.log.warn({ kill_switch: state.active, by: req.principal?.subject }, 'kill switch changed');
    return state;
  });

  app.post('/v1/runtime/decision/:envelope_id', {
    config: { capability: 'decision.rerun' },
    schema: { tags: ['runtime'], summary: 'Re-run the decision on a stored envelope', params: z.object({ envelope_id: z.string().max(100) }), response: { 200: DecisionRerunResponse } },
  }, async (req) => {
    if (!EnvelopeParams.safeParse(req.params).success) throw new AppError('not_found', `no envelope with id ${req.params.envelope_id}`);
    return governed(req, {}, () => governor.rerun(req.params.envelope_id));
  });
};
