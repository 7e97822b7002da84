// Malformed AdmissionReviews (issue 16): a seeded fuzz run of mutated reviews and raw bodies, each sent
// to the webhook over TLS. Every answer is HTTP 200 with a well-formed AdmissionReview (the response
// contract), allowed, naming the request's uid when it had a usable one; a patch, when one comes, applies
// to the object it was made for. The server never crashes and is healthy afterwards.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import jsonpatch from 'fast-json-patch';
import t from 'tap';
import { AdmissionReviewResponse } from '../../src/contracts/admission.js';
import { httpsRequest, startInjector } from '../helpers/injector.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'injector');
const SEEDS = ['istio-sidecar-present', 'several-containers', 'ns-enabled-pod-silent', 'linkerd-proxy-present'].map((n) => JSON.parse(readFileSync(join(FIXTURES, `${n}.review.json`), 'utf8')));
const ROUNDS = Number(process.env.GOV_INJECTOR_FUZZ_ROUNDS ?? 400);
const SEED = Number(process.env.GOV_INJECTOR_FUZZ_SEED ?? 16);

/** mulberry32: a small seeded PRNG, so a failing run can be replayed with its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

t.test(`${ROUNDS} malformed reviews, seed ${SEED}: always a well-formed answer, never a crash`, async (t) => {
  const inj = await startInjector();
  t.teardown(() => inj.close());
  const rnd = prng(SEED);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
  const junk = (): unknown =>
    pick([
      () => null,
      () => 0,
      () => -1.5e308,
      () => true,
      () => '',
      () => 'x'.repeat(Math.floor(rnd() * 5000)),
      () => '~1/../\u0000\ud800',
      () => [],
      () => [null, 1, 'a'],
      () => ({}),
      () => ({ __proto__: { polluted: true }, constructor: 'x' }),
      () => JSON.parse('{"__proto__": {"polluted": true}}'),
      () => ({ name: 7 }),
      () => [{ name: 'x', env: 'nope' }],
      () => Array.from({ length: 50 }, () => ({ name: 'c', env: [{ name: 1 }] })),
      () => JSON.parse('['.repeat(500) + ']'.repeat(500)),
    ])();

  /** Every path (as keys) of a JSON value, objects and arrays alike. */
  const paths = (v: unknown, at: Array<string | number> = [], out: Array<Array<string | number>> = []) => {
    out.push(at);
    if (Array.isArray(v)) v.forEach((x, i) => paths(x, [...at, i], out));
    else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) paths(x, [...at, k], out);
    return out;
  };
  const mutate = (doc: any): any => {
    const d = structuredClone(doc);
    const n = 1 + Math.floor(rnd() * 4);
    for (let i = 0; i < n; i++) {
      const all = paths(d).filter((p) => p.length > 0);
      if (all.length === 0) break;
      const p = pick(all);
      let parent = d;
      for (const k of p.slice(0, -1)) parent = parent[k];
      const last = p[p.length - 1];
      const r = rnd();
      if (r < 0.35 && parent !== null && typeof parent === 'object') {
        if (Array.isArray(parent)) parent.splice(Number(last), 1);
        else delete parent[last];
      } else if (parent !== null && typeof parent === 'object') parent[last] = junk();
      if (rnd() < 0.1) d.request = { ...d.request, annotations: { [pick(['gov.io/inject', '__proto__', 'a~b/c'])]: junk() } };
    }
    return d;
  };
  const rawBodies = ['', 'null', '[]', '{', '"AdmissionReview"', '{"apiVersion":"admission.k8s.io/v1"}', '\u00ff\u00fe', '{"request":{"uid":' + '"u"'.repeat(3) + '}}', '['.repeat(100_000)];

  const counts = { patched: 0, status: 0, plain: 0 };
  for (let i = 0; i < ROUNDS; i++) {
    const base = pick(SEEDS);
    let body: string;
    let sent: any = undefined;
    if (i < rawBodies.length) body = rawBodies[i];
    else {
      sent = mutate(base);
      body = JSON.stringify(sent);
    }
    const res = await httpsRequest(inj.server.url, { path: pick(['/inject', '/inject/opt-in']), body, ca: inj.ca });
    if (res.status !== 200) {
      t.fail(`round ${i}: HTTP ${res.status}`, { body: body.slice(0, 300) });
      break;
    }
    const parsed = AdmissionReviewResponse.safeParse(JSON.parse(res.body));
    if (!parsed.success) {
      t.fail(`round ${i}: not a well-formed AdmissionReview answer`, { answer: res.body.slice(0, 500) });
      break;
    }
    const r = parsed.data.response;
    if (!r.allowed) t.fail(`round ${i}: refused`);
    const uid = sent?.request?.uid;
    const expectUid = typeof uid === 'string' && uid.length <= 128 ? uid : '';
    if (r.uid !== expectUid) t.fail(`round ${i}: uid ${r.uid} for ${expectUid}`);
    if (r.patch !== undefined) {
      counts.patched++;
      try {
        jsonpatch.applyPatch(structuredClone(sent.request.object), JSON.parse(Buffer.from(r.patch, 'base64').toString('utf8')), true, false);
      } catch (e) {
        t.fail(`round ${i}: the patch does not apply: ${(e as Error).message}`);
      }
    } else if (r.status !== undefined) counts.status++;
    else counts.plain++;
  }
  t.pass(`answered ${ROUNDS}: ${counts.patched} patched, ${counts.status} with a status saying why not, ${counts.plain} left alone`);
  t.ok(counts.patched > 0 && counts.status > 0, 'the run reached both the patch builder and the malformed paths');
  const big = await httpsRequest(inj.server.url, { path: '/inject', body: Buffer.alloc(9 * 1024 * 1024, 0x20), ca: inj.ca });
  t.equal(big.status, 200);
  t.equal(AdmissionReviewResponse.parse(JSON.parse(big.body)).response.status?.code, 413, 'an oversized review is answered, not read whole');
  const health = await httpsRequest(inj.server.url, { method: 'GET', path: '/healthz', ca: inj.ca });
  t.equal(health.status, 200, 'still healthy');
  t.notOk(({} as Record<string, unknown>).polluted, 'no prototype was polluted');
  t.notOk(inj.logs.some((l) => l.msg === 'admission review failed'), 'no review reached the internal-error path');
});
