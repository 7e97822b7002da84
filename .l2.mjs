import { open } from 'lmdb';
let last=0,ctr=0; function v7(){ const ms=Date.now(); const b=crypto.randomBytes(16); b.writeUIntBE(ms,0,6); b[6]=(b[6]&0x0f)|0x70; b[8]=(b[8]&0x3f)|0x80; const h=b.toString("hex"); return h.slice(0,8)+"-"+h.slice(8,12)+"-"+h.slice(12,16)+"-"+h.slice(16,20)+"-"+h.slice(20); }
import fs from 'node:fs'; import os from 'node:os'; import path from 'node:path'; import crypto from 'node:crypto';
const mode = process.argv[2];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lb-'));
const env = open({ path: dir, maxDbs: 8 });
const rows = env.openDB('rows', { encoding: 'binary' });
const idx = env.openDB('envelopes', {});
const val = crypto.randomBytes(1300);
const N = 200000, WAVE = 5000;
let seq = 0; let jsT = 0n, waitT = 0n;
const t0 = process.hrtime.bigint();
for (let w = 0; w < N / WAVE; w++) {
  const batchVals = [];
  for (let i = 0; i < WAVE; i++) { batchVals.push([++seq, Buffer.from(val), (process.argv[3]==="v7"? v7(): crypto.randomUUID())]); }
  const a = process.hrtime.bigint();
  let p;
  if (mode === 'child') p = env.childTransaction(() => { for (const [s, v, id] of batchVals) { rows.put(s, v, {append: true}); idx.put(id, s); } });
  else if (mode === 'rowsonly') p = env.childTransaction(() => { for (const [s, v, id] of batchVals) { rows.put(s, v, {append: true}); } });
  else p = env.batch(() => { for (const [s, v, id] of batchVals) { rows.put(s, v); idx.put(id, s); } });
  const f = new Promise((res, rej) => env.flushed.then(res, rej));
  const b = process.hrtime.bigint();
  await p; const c = process.hrtime.bigint(); await f; const d = process.hrtime.bigint();
  jsT += b - a; waitT += d - b;
}
const dt = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(mode, Math.round(N / dt), 'rows/s', 'queue ms', Number(jsT)/1e6, 'wait ms', Number(waitT)/1e6, 'total ms', dt*1000);
await env.close(); fs.rmSync(dir, { recursive: true });
