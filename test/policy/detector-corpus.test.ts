// The labelled PII/secrets corpus (test/fixtures/detectors/pii-secrets.jsonl, issue 13): well-formed, at
// least 40% held out, and the detectors meet the goals on the held-out split (precision >= 0.97,
// recall >= 0.95 for personal data and for secrets). bench/detector-quality.js reports the same figures.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { DETECTORS } from '../../src/policy/detectors.js';

interface Sample { id: string; split: 'train' | 'test'; lang: string; category: string; where: string; text: string; expect: string[] }

const samples = readFileSync('test/fixtures/detectors/pii-secrets.jsonl', 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Sample);
const PII = new Set(['us_ssn', 'email', 'phone', 'credit_card', 'iban', 'ip_address']);

t.test('the corpus is well-formed and mostly held out', async (t) => {
  t.ok(samples.length >= 400, `${samples.length} samples`);
  t.equal(new Set(samples.map((s) => s.id)).size, samples.length, 'ids are unique');
  const test = samples.filter((s) => s.split === 'test').length;
  t.ok(test / samples.length >= 0.4, `${test} of ${samples.length} held out`);
  for (const s of samples) {
    t.ok(['train', 'test'].includes(s.split) && ['input', 'output', 'tool_result', 'context'].includes(s.where) && /^[a-z]{2}$/.test(s.lang), s.id);
    for (const name of s.expect) t.ok(DETECTORS.has(name), `${s.id}: ${name} is a detector`);
  }
  t.ok(samples.filter((s) => s.expect.length === 0).length >= samples.length / 3, 'at least a third are negatives that must not fire');
});

t.test('held-out split: precision >= 0.97 and recall >= 0.95 for personal data and for secrets', async (t) => {
  const names = [...new Set(samples.flatMap((s) => s.expect))];
  const tally = { pii: { tp: 0, fp: 0, fn: 0 }, secrets: { tp: 0, fp: 0, fn: 0 } };
  for (const s of samples.filter((x) => x.split === 'test')) {
    for (const name of names) {
      const fired = DETECTORS.get(name)!.find(s.text) !== -1;
      const expected = s.expect.includes(name);
      const k = tally[PII.has(name) ? 'pii' : 'secrets'];
      if (fired && expected) k.tp++;
      else if (fired) k.fp++;
      else if (expected) k.fn++;
    }
  }
  for (const [kind, k] of Object.entries(tally)) {
    const precision = k.tp / (k.tp + k.fp);
    const recall = k.tp / (k.tp + k.fn);
    t.ok(precision >= 0.97, `${kind} precision ${precision.toFixed(3)}`);
    t.ok(recall >= 0.95, `${kind} recall ${recall.toFixed(3)}`);
  }
});
