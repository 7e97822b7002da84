// values.schema.json and the chart's own checks (issue 16): a wrong value fails `helm template` (as it fails
// `helm install` and `helm lint`) with a message naming the value, before anything reaches a cluster. The
// gateway settings the schema lets through `gateway.env` and `gateway.secretEnv` are the real ones.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { SECRET_SETTINGS } from '../../src/config/secret-files.js';
import { SETTING_DOCS } from '../../src/config/settings.js';
import { CHART, render, requireHelm } from '../helpers/helm.js';

interface Refusal {
  set: string[];
  /** What helm's message must contain: the value's path, and why. */
  says: RegExp[];
}

const REFUSED: Record<string, Refusal> = {
  'a replica count that is not a number': { set: ['gateway.replicaCount=two'], says: [/gateway\.replicaCount/, /integer/] },
  'a failurePolicy the API server does not know': { set: ['injector.failurePolicy=Maybe'], says: [/injector\.failurePolicy/, /Fail.*Ignore/] },
  'an unknown top-level key': { set: ['gatway.replicaCount=2'], says: [/Additional property gatway is not allowed/] },
  'an unknown key in a section': { set: ['injector.sidecar.memoryMib=256'], says: [/injector\.sidecar/, /memoryMib/] },
  'a misspelt gateway setting': { set: ['gateway.env.GOV_STATE_REFRESH=500'], says: [/gateway\.env/, /GOV_STATE_REFRESH/] },
  'a secret setting as a plain value': { set: ['gateway.env.GOV_DATABASE_URL=postgres://u:p@db/gov'], says: [/gateway\.env/, /GOV_DATABASE_URL/] },
  'a setting the chart sets itself': { set: ['gateway.env.GOV_HOST=127.0.0.1'], says: [/gateway\.env/, /GOV_HOST/] },
  'a sidecar memory below what the sidecar survives': { set: ['injector.sidecar.memoryMiB=64'], says: [/injector\.sidecar\.memoryMiB/, /100/] },
  'a webhook timeout past the API server\'s 30 s': { set: ['injector.timeoutSeconds=60'], says: [/injector\.timeoutSeconds/] },
  'a quantity that is not one': { set: ['injector.sidecar.ledgerSizeLimit=lots'], says: [/injector\.sidecar\.ledgerSizeLimit/] },
  'an unknown certificate mode': { set: ['injector.tls.mode=selfsigned'], says: [/injector\.tls\.mode/] },
  'several gateway replicas on a per-pod LMDB ledger': { set: ['gateway.database.existingSecret=', 'gateway.replicaCount=2'], says: [/gateway\.database\.existingSecret is required/] },
  'autoscaling on a per-pod LMDB ledger': { set: ['gateway.database.existingSecret=', 'gateway.replicaCount=1', 'gateway.autoscaling.enabled=true'], says: [/gateway\.database\.existingSecret is required/] },
  'auth without the Secret holding the keys': { set: ['gateway.auth.existingSecret='], says: [/gateway\.auth\.existingSecret is required/] },
  'an HPA whose minimum is above its maximum': { set: ['gateway.autoscaling.enabled=true', 'gateway.autoscaling.minReplicas=5', 'gateway.autoscaling.maxReplicas=3'], says: [/minReplicas \(5\) is above maxReplicas \(3\)/] },
  'a certificate Secret of your own without its CA': { set: ['injector.tls.mode=secret', 'injector.tls.secret.name=my-tls'], says: [/injector\.tls\.secret\.caBundle/] },
  'a cert-manager issuer without a name': { set: ['injector.tls.mode=certManager', 'injector.tls.certManager.issuerRef.kind=ClusterIssuer'], says: [/issuerRef needs a name/] },
};

for (const [what, r] of Object.entries(REFUSED)) {
  t.test(`refused: ${what}`, async (t) => {
    const bin = await requireHelm(t);
    if (bin === null) return;
    const out = await render(bin, { set: r.set });
    t.equal(out.ok, false, 'helm template fails');
    for (const re of r.says) t.match(out.stderr, re, `the message says ${re}`);
  });
}

t.test('the same values, corrected, render', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  for (const set of [['gateway.replicaCount=3'], ['injector.failurePolicy=Ignore'], ['gateway.env.GOV_STATE_REFRESH_MS=500'], ['injector.sidecar.memoryMiB=100'], ['gateway.database.existingSecret=', 'gateway.replicaCount=1']]) {
    const out = await render(bin, { set });
    t.ok(out.ok, `${set.join(' ')} renders${out.ok ? '' : `: ${out.stderr}`}`);
  }
});

t.test('the schema lets through gateway.env and gateway.secretEnv only real gateway settings, and all of them but the chart\'s own', async (t) => {
  const schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8'));
  const plain: string[] = schema.properties.gateway.properties.env.propertyNames.enum;
  const secret: string[] = schema.properties.gateway.properties.secretEnv.items.properties.name.enum;
  const gatewaySettings = new Set(SETTING_DOCS.filter((d) => d.modes.includes('gateway')).map((d) => d.name));
  // Set by the templates from their own values (database, redis, auth, policies, govEnv, logLevel).
  const chartOwn = ['GOV_ENV', 'GOV_HOST', 'GOV_PORT', 'GOV_DB_PATH', 'GOV_DATABASE_URL', 'AUTH_ENABLED', 'GOV_API_KEYS', 'GOV_JWT_SECRET', 'GOV_REDIS_URL', 'GOV_POLICY_DIR', 'GOV_LOG_LEVEL',
    // The secrets' <NAME>_FILE variants: the chart hands secrets over as secretKeyRefs and mounts no Secret
    // files, so a path set through the values would name a file the pod does not have.
    ...SECRET_SETTINGS.map((n) => `${n}_FILE`).filter((n) => gatewaySettings.has(n))];
  // Only from a Secret: keys and tokens never stand as literals in a pod spec.
  const secretOnly = ['GOV_AUDIT_ENCRYPTION_KEY', 'GOV_LEDGER_ANCHOR_KEY', 'GOV_DETECTOR_TOKEN', 'GOV_REVIEW_WEBHOOK_SECRET'];
  for (const n of [...plain, ...secret, ...chartOwn, ...secretOnly]) t.ok(gatewaySettings.has(n), `${n} is a gateway setting`);
  for (const n of gatewaySettings) {
    const where = chartOwn.includes(n) ? 'chart' : secretOnly.includes(n) ? 'secret' : 'plain';
    t.equal(plain.includes(n), where === 'plain', `${n}: ${where === 'plain' ? 'allowed' : 'refused'} in gateway.env`);
    t.equal(secret.includes(n), where !== 'chart', `${n}: ${where === 'chart' ? 'refused' : 'allowed'} in gateway.secretEnv`);
  }
  for (const n of secretOnly) t.match(SETTING_DOCS.find((d) => d.name === n)!.help, /key|secret|token/i, `${n} is secret by its own description`);
});
