import { open } from 'lmdb';
import fs from 'node:fs'; import os from 'node:os'; import path from 'node:path'; import crypto from 'node:crypto';
const mode = process.argv[2]; const ovl = process.argv[3] !== 'noovl';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lb-'));
const env = open({ path: dir, maxDbs: 8, overlappingSync: ovl });
const rows = env.openDB('rows', { encoding: 'binary' });
const idx = env.openDB('envelopes', {});
const val = crypto.randomBytes(1300);
const N = 200000, WAVE = 5000;
let seq = 0;
const t0 = process.hrtime.bigint();
for (let w = 0; w < N / WAVE; w++) {
  const ids = []; 
  const batchVals = [];
  for (let i = 0; i < WAVE; i++) { batchVals.push([++seq, Buffer.from(val), crypto.randomUUID()]); }
  let p;
  if (mode === 'child') p = env.childTransaction(() => { for (const [s, v, id] of batchVals) { rows.put(s, v, {append: true}); idx.put(id, s); } });
  else if (mode === 'txn') p = env.transaction(() => { for (const [s, v, id] of batchVals) { rows.put(s, v, {append: true}); idx.put(id, s); } });
  else p = env.batch(() => { for (const [s, v, id] of batchVals) { rows.put(s, v); idx.put(id, s); } });
  const f = new Promise((res, rej) => env.flushed.then(res, rej));
  await p; await f;
}
const dt = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(mode, ovl, Math.round(N / dt), 'rows/s', 'count', rows.getCount());
const t1 = process.hrtime.bigint(); let n = 0, bytes = 0;
for (const { key, value } of rows.getRange({})) { n++; bytes += value.length; }
const dt1 = Number(process.hrtime.bigint() - t1) / 1e9; console.log('range read', Math.round(n / dt1), 'rows/s');
await env.close(); fs.rmSync(dir, { recursive: true });
