import type {} from '@fastify/swagger'; // its FastifyInstance.swagger() typing; the module itself loads lazily below
import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import { jsonSchemaTransform, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import type { Settings } from '../config/settings.js';
import type { RateLimitRules } from '../config/rate-limits.js';
import type { Ledger, ReplicaStore } from '../ledger/port.js';
import type { Governor } from '../runtime/governor.js';
import type { KillSwitch } from '../runtime/kill-switch.js';
import type { ManifestRegistry } from '../runtime/manifest-registry.js';
import type { RateLimiter } from '../runtime/rate-limiter.js';
import type { ReviewQueue } from '../runtime/review-queue.js';
import type { PaymentIntents } from '../runtime/payment-intents.js';
import type { PolicyRegistry } from '../runtime/policy-registry.js';
import type { HealthChecks } from '../runtime/health.js';
import type { GovMetrics } from '../telemetry/metrics.js';
import type { Authenticator } from './authenticators.js';
import { authPlugin } from './plugins/auth.js';
import { jsonDataProblem } from '../contracts/json-data.js';
import { AppError } from './app-error.js';
import { errorsPlugin } from './plugins/errors.js';
import { observabilityPlugin } from './plugins/observability.js';
import { agentIdentity } from '../config/agent-identity.js';
import { rateLimitPlugin, storeDownReporter } from './plugins/rate-limit.js';
import { scopedLimiters } from '../runtime/rate-limit-scopes.js';
import { agentRoutes } from './routes/agents.js';
import { policyRoutes } from './routes/policy.js';
import { auditRoutes } from './routes/audit.js';
import { featureRoutes } from './routes/features.js';
import { authRoutes } from './routes/auth.js';
import { healthRoutes } from './routes/health.js';
import { metricsRoutes } from './routes/metrics.js';
import { ingestRoutes } from './routes/ingest.js';
import { reviewRoutes } from './routes/review.js';
import { runtimeRoutes } from './routes/runtime.js';
import { paymentRoutes } from './routes/payments.js';

export interface AppDeps {
  settings: Settings;
  logger: Logger;
  governor: Governor;
  ledger: Ledger;
  /** A central gateway's store of replicated source chains: the ingest route and per-source verify. */
  replicas?: ReplicaStore;
  killSwitch: KillSwitch;
  manifests: ManifestRegistry;
  reviewQueue: ReviewQueue;
  /** POST /v1/invoicepay/payments (runtime/payment-intents.ts). */
  payments: PaymentIntents;
  policies: PolicyRegistry;
  authenticator: Authenticator;
  /** Features this deployment includes (judge, trust_chain, sso, ...): absent ones answer 402. */
  entitlements: ReadonlySet<string>;
  /** The shared (Redis) or in-process limiter; each route scope applies its own Redis-down behaviour to it. */
  limiter: RateLimiter;
  rateRules: RateLimitRules;
  metrics: GovMetrics;
  clock: () => Date;
  healthPath: '/v1/health' | '/health';
  /** The stores and links the health routes and the gov_health_* gauges report. */
  health: HealthChecks;
}

/** The one app factory every mode uses; modes differ only in the deps their composition (src/compose/) hands it. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    // Our observability plugin writes the one access line per request instead.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: deps.settings.maxBodyBytes,
    genReqId: () => randomUUID(),
    requestIdHeader: 'x-request-id',
    return503OnClosing: true,
    routerOptions: { maxParamLength: 200 },
    // Bad percent-encoding (400), an over-long path parameter (414) and constraint failures bypass the error
    // handler; answer them in the same {"error": {...}} shape as every other error.
    frameworkErrors: (err, _req, reply) => {
      const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 400;
      void (reply as FastifyReply).code(status).send({ error: { code: 'bad_request', message: err.message } });
    },
  }).withTypeProvider<ZodTypeProvider>();

  // Fastify's close waits for every open request, and a client that stalls mid-body holds one open until
  // Node's requestTimeout (5 minutes): past GOV_SHUTDOWN_GRACE_MS its connection is cut, so that SIGTERM
  // ends the process within a pod's termination grace period instead of a SIGKILL. Hooked on close itself,
  // because the sidecar closes this app beside its proxy rather than through its composition.
  let cutStalled: NodeJS.Timeout | undefined;
  app.addHook('preClose', (done) => {
    cutStalled = setTimeout(() => app.server.closeAllConnections(), deps.settings.shutdownGraceMs).unref();
    done();
  });
  app.addHook('onClose', (_instance, done) => {
    clearTimeout(cutStalled);
    done();
  });

  // Before any schema runs, on every route and whatever the store: a non-finite number, absurd nesting, or a
  // NUL or lone surrogate in any string the caller sent (path, query or body) is a 422 naming the field.
  app.addHook('preValidation', async (req) => {
    for (const [where, data] of [['params', req.params], ['querystring', req.query], ['body', req.body]] as const) {
      if (data === null || data === undefined) continue;
      const problem = jsonDataProblem(data);
      if (problem) throw new AppError('validation_failed', `request ${where} failed validation: ${problem.message}`, { issues: [{ path: `${where}${problem.path}`, message: problem.message }] });
    }
  });

  app.setValidatorCompiler(validatorCompiler);
  // Responses are typed by the same zod contracts at compile time; re-validating them on every request
  // would cost the hot path a second parse, so they are serialized as they are.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));

  await app.register(errorsPlugin);
  await app.register(observabilityPlugin, { metrics: deps.metrics });
  const proxy = deps.settings.proxy;
  const limiters = scopedLimiters(deps.limiter, storeDownReporter(deps.logger, deps.metrics));
  await app.register(rateLimitPlugin, { enabled: deps.settings.rateLimitEnabled, limiters, rules: deps.rateRules, clock: () => deps.clock().getTime(), ...(proxy === null ? {} : { identity: agentIdentity(proxy) }) });
  const failureThrottle = deps.settings.rateLimitEnabled ? { limiter: limiters.auth_failures, limit: deps.rateRules.authFailuresPerIp, windowMs: deps.rateRules.windowMs, clock: () => deps.clock().getTime() } : undefined;
  await app.register(authPlugin, { authenticator: deps.authenticator, entitlements: deps.entitlements, ...(failureThrottle === undefined ? {} : { failureThrottle }) });

  if (deps.settings.env !== 'production') {
    // Loaded only here: production (and a sidecar in production) never pays their memory or start-up.
    const [{ default: swagger }, { default: swaggerUi }] = await Promise.all([import('@fastify/swagger'), import('@fastify/swagger-ui')]);
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: { title: 'Gov Gateway', description: 'Runtime governance gateway for AI agents', version: '1' },
        components: {
          securitySchemes: deps.healthPath === '/v1/health'
            ? { bearer: { type: 'http', scheme: 'bearer' } }
            : { govToken: { type: 'apiKey', in: 'header', name: 'X-Gov-Token' } },
        },
        security: [deps.healthPath === '/v1/health' ? { bearer: [] } : { govToken: [] }],
      },
      transform: jsonSchemaTransform,
    });
    await app.register(swaggerUi, { routePrefix: '/docs' });
    app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  }

  await app.register(healthRoutes(deps));
  await app.register(authRoutes(deps));
  await app.register(reviewRoutes(deps));
  await app.register(metricsRoutes(deps));
  await app.register(runtimeRoutes(deps));
  await app.register(paymentRoutes(deps));
  await app.register(auditRoutes(deps));
  const replicas = deps.replicas;
  if (replicas !== undefined) await app.register(ingestRoutes({ ...deps, replicas }));
  await app.register(agentRoutes(deps));
  await app.register(policyRoutes(deps));
  await app.register(featureRoutes(deps));
  return app;
}
