import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { PolicyEvaluateRequest, PolicyEvaluateResponse } from '../../contracts/policy.js';
import { fromPreCheck, fromValidate } from '../../engine/normalize.js';
import type { AppDeps } from '../app.js';

export const policyRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
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
    const { result, policies } = deps.governor.dryRun(input);
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
};
