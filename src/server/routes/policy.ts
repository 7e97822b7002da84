import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import {
  ActivateRequest,
  ActivateResponse,
  ActivateSetRequest,
  ActivateSetResponse,
  DiffQuery,
  PackDiffResponse,
  PackHistoryResponse,
  PackNameParams,
  PackVersionDetail,
  PackVersionParams,
  PolicyEvaluateRequest,
  PolicyEvaluateResponse,
  PolicyPacksResponse,
  PublishPackBody,
  PublishPackResponse,
  type PackVersionSummary,
} from '../../contracts/policy.js';
import { fromPreCheck, fromValidate } from '../../engine/normalize.js';
import { PolicyLoadError, type PolicyProblem } from '../../policy/errors.js';
import type { PolicySource } from '../../policy/pack.js';
import type { PolicySet } from '../../policy/policy-set.js';
import { PolicyRefError, type PolicyActor, type StoredPackVersion } from '../../policy/version-store.js';
import { PolicyConflictError } from '../../runtime/policy-registry.js';
import { AppError } from '../app-error.js';
import type { AppDeps } from '../app.js';

const YAML_TYPES = ['application/yaml', 'text/yaml', 'application/x-yaml', 'text/x-yaml'];

const issues = (problems: readonly PolicyProblem[]) => ({ issues: problems.map((p) => ({ path: p.path, line: p.line, column: p.column, message: p.message })) });

/** The policy layer's errors in the API's catalogue: invalid pack 422, immutable or clashing 409, unknown 404. */
function asAppError(e: unknown): unknown {
  if (e instanceof PolicyLoadError) return new AppError('validation_failed', `the pack is invalid: ${e.located.map((p) => `${p.line === null ? '' : `${p.line}:${p.column}: `}${p.path === '' ? '' : `${p.path}: `}${p.message}`).join('; ')}`, issues(e.located));
  if (e instanceof PolicyConflictError) return new AppError('conflict', e.message, e.problems.length > 0 ? issues(e.problems) : undefined);
  if (e instanceof PolicyRefError) {
    if (e.kind === 'not_found') return new AppError('not_found', e.message);
    if (e.kind === 'digest_mismatch') return new AppError('conflict', e.message);
    return new AppError('validation_failed', e.message, { issues: [{ path: 'policy_version', message: e.message }] });
  }
  return e;
}

async function mapped<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (e) {
    throw asAppError(e);
  }
}

function actor(req: FastifyRequest): PolicyActor {
  return { kind: 'api', subject: req.principal?.subject ?? 'anonymous', tier: req.principal?.tier ?? 'unknown' };
}

function summary(v: StoredPackVersion, activeVersion: string | null): PackVersionSummary {
  return { name: v.name, version: v.version, digest: v.digest, format: v.format, rules: v.rules, description: v.description, published_at: v.published_at, published_by: v.published_by, active: v.version === activeVersion };
}

/** What a publish body holds, as a source: YAML text, `{format, text}`, or a pack object stored as indented JSON. */
function sourceOf(req: FastifyRequest, body: z.infer<typeof PublishPackBody>): PolicySource {
  if (typeof body === 'string') {
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (!YAML_TYPES.includes(type)) throw new AppError('unsupported_media_type', `send a pack as ${YAML_TYPES.slice(0, 2).join(' or ')}, or as application/json`);
    return { origin: 'request body', text: body, format: 'yaml' };
  }
  if (typeof body.text === 'string' && (body.format === 'yaml' || body.format === 'json') && Object.keys(body).length === 2) {
    return { origin: 'request body', text: body.text, format: body.format };
  }
  // Line and column of a problem then point into this text, which is what GET .../versions/{version} returns.
  return { origin: 'request body', text: `${JSON.stringify(body, null, 2)}\n`, format: 'json' };
}

export const policyRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  const registry = deps.policies;
  // Encapsulated in this plugin: only the policy routes take YAML bodies.
  app.addContentTypeParser(YAML_TYPES, { parseAs: 'string' }, (_req, body, done) => done(null, body));

  app.post('/v1/policy/evaluate', {
    config: { capability: 'policy.evaluate' },
    schema: {
      tags: ['policy'],
      summary: 'Dry run: the rules an execution or a proposed action matches and the outcome the pipeline would reach; nothing is recorded',
      body: PolicyEvaluateRequest,
      response: { 200: PolicyEvaluateResponse },
    },
  }, async (req) => {
    const input = req.body.validate !== undefined ? fromValidate(req.body.validate) : fromPreCheck(req.body.pre_check!);
    let set: PolicySet | undefined;
    if (req.body.policy_version !== undefined) {
      const ref = req.body.policy_version;
      set = await mapped(() => registry.resolve(ref));
    }
    const { result, policies } = await deps.governor.dryRun(input, set);
    const byId = new Map(policies.rules.map((r) => [r.id, r]));
    const matched = [];
    for (const f of result.validation.failures) {
      const rule = (f.check === 'policy' || f.check === 'adversarial') ? byId.get(f.code) : undefined;
      if (rule === undefined) continue;
      matched.push({ id: rule.id, pack: rule.pack, effect: rule.effect, severity: rule.severity, amount: rule.amount, gate: rule.gate, path: f.path ?? '', detector: result.detectors?.[rule.id] ?? rule.matcher.label, message: f.message });
    }
    return {
      policy_version: result.decision.policy_version,
      outcome: result.decision.outcome,
      decision: result.decision,
      policy_score: result.validation.policy_score,
      safety_score: result.validation.safety_score,
      matched,
    };
  });

  app.get('/v1/policy/packs', {
    config: { capability: 'policy.read' },
    schema: { tags: ['policy'], summary: 'Policy packs with their active version, and the active set', response: { 200: PolicyPacksResponse } },
  }, async () => {
    const packs = await registry.listPacks();
    return {
      policy_version: registry.current().version,
      packs: packs.map((p) => ({
        name: p.name,
        active_version: p.active?.version ?? null,
        active: p.active === null ? null : { version: p.active.version, set_by: p.active.set_by, at: p.active.at, by: p.active.by },
        latest_version: p.versions[p.versions.length - 1]!.version,
        versions: p.versions.length,
      })),
    };
  });

  app.post('/v1/policy/packs', {
    config: { capability: 'policy.write' },
    schema: {
      tags: ['policy'],
      summary: 'Publish a pack version (YAML or JSON); immutable once published; not activated',
      consumes: ['application/json', ...YAML_TYPES.slice(0, 2)],
      body: PublishPackBody,
      response: { 200: PublishPackResponse, 201: PublishPackResponse },
    },
  }, async (req, reply) => {
    const source = sourceOf(req, req.body);
    const r = await mapped(() => registry.publish(source, actor(req)));
    const active = (await registry.listPacks()).find((p) => p.name === r.version.name)?.active?.version ?? null;
    if (r.created) req.log.info({ pack: r.version.name, version: r.version.version, by: req.principal?.subject }, 'policy version published');
    return reply.code(r.created ? 201 : 200).send({ created: r.created, version: summary(r.version, active) });
  });

  app.get('/v1/policy/packs/:name/versions', {
    config: { capability: 'policy.read' },
    schema: { tags: ['policy'], summary: "A pack's published versions and activations, newest first", params: PackNameParams, response: { 200: PackHistoryResponse } },
  }, async (req) => {
    const h = await mapped(() => registry.history(req.params.name));
    const activeVersion = h.active?.version ?? null;
    return {
      name: req.params.name,
      active_version: activeVersion,
      versions: h.versions.map((v) => summary(v, activeVersion)).reverse(),
      activations: h.activations.map((a) => ({ action: a.action, version: a.version, previous_version: a.previous_version, at: a.at, by: a.by })).reverse(),
    };
  });

  app.get('/v1/policy/packs/:name/versions/:version', {
    config: { capability: 'policy.read' },
    schema: { tags: ['policy'], summary: 'One published version with its source', params: PackVersionParams, response: { 200: PackVersionDetail } },
  }, async (req) => {
    const v = await mapped(() => registry.getVersion(req.params.name, req.params.version));
    const activeVersion = (await registry.listPacks()).find((p) => p.name === v.name)?.active?.version ?? null;
    return { ...summary(v, activeVersion), text: v.text };
  });

  app.post('/v1/policy/packs/:name/activate', {
    config: { capability: 'policy.write' },
    schema: { tags: ['policy'], summary: 'Activate a published version, or roll back to an earlier one; applies from the next decision', params: PackNameParams, body: ActivateRequest, response: { 200: ActivateResponse } },
  }, async (req) => {
    const r = await mapped(() => registry.activate(req.params.name, req.body.version, actor(req)));
    if (r.changed) req.log.warn({ pack: r.name, version: r.version, previous_version: r.previous_version, rollback: r.rollback, by: req.principal?.subject }, 'policy version activated');
    return r;
  });

  app.post('/v1/policy/activate', {
    config: { capability: 'policy.write' },
    schema: {
      tags: ['policy'],
      summary: 'Activate, roll back or deactivate several packs in one step: the set they make is checked and swapped in whole, or nothing changes',
      body: ActivateSetRequest,
      response: { 200: ActivateSetResponse },
    },
  }, async (req) => {
    const results = await mapped(() => registry.activateSet(req.body.packs, actor(req)));
    for (const r of results) {
      if (r.changed) req.log.warn({ pack: r.name, version: r.version, previous_version: r.previous_version, rollback: r.rollback, by: req.principal?.subject }, r.version === null ? 'policy pack deactivated' : 'policy version activated');
    }
    return { policy_version: results[0]!.policy_version, packs: results };
  });

  app.post('/v1/policy/packs/:name/deactivate', {
    config: { capability: 'policy.write' },
    schema: { tags: ['policy'], summary: 'Take a pack out of the active set (its versions stay published)', params: PackNameParams, response: { 200: ActivateResponse } },
  }, async (req) => {
    const r = await mapped(() => registry.activate(req.params.name, null, actor(req)));
    if (r.changed) req.log.warn({ pack: r.name, previous_version: r.previous_version, by: req.principal?.subject }, 'policy pack deactivated');
    return r;
  });

  app.get('/v1/policy/packs/:name/diff', {
    config: { capability: 'policy.read' },
    schema: { tags: ['policy'], summary: 'Rule-level difference between two versions of a pack', params: PackNameParams, querystring: DiffQuery, response: { 200: PackDiffResponse } },
  }, async (req) => {
    const d = await mapped(() => registry.diff(req.params.name, req.query.from, req.query.to));
    return { name: req.params.name, from: req.query.from, to: req.query.to, ...d };
  });
};
