// How much of the ledger file ends up mapped into the process (file-backed RSS), run as its own process by
// bench/ledger.js so that nothing else is in its memory: 200k rows of ~2 KB appended 16 at a time, as a
// sidecar's small transactions write them. Prints one JSON line.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { newEnvelopeId } from '../dist/ledger/envelope-id.js';
import { openLmdbStorage } from '../dist/ledger/lmdb.js';
import { parseSmaps } from '../dist/runtime/startup-pages.js';

const ROWS = Number(process.env.LEDGER_MAPPED_ROWS ?? 200_000);
const PER_COMMIT = 16;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gov-ledger-mapped-'));
const storage = await openLmdbStorage(dir, { durability: 'commit' });
const payload = { request: { input: 'x'.repeat(1000) }, response: { note: 'y'.repeat(900) } };
try {
  for (let i = 0; i < ROWS; i += PER_COMMIT) {
    const batch = [];
    for (let k = 0; k < PER_COMMIT; k++) {
      batch.push(
        storage.ledger.append({
          envelope_id: newEnvelopeId(),
          phase: 'validate',
          agent_id: 'agent-a',
          decision: 'approve',
          risk_tier: 'low',
          confidence: 90,
          timestamp: new Date().toISOString(),
          parent_envelope_id: null,
          policy_version: 'p',
          score_version: 's',
          payload,
        }),
      );
    }
    await Promise.all(batch);
  }
  // Resident pages of every mapping of the ledger's data file.
  const mappedKb = parseSmaps(fs.readFileSync('/proc/self/smaps', 'utf8'))
    .filter((m) => m.path.endsWith('/data.mdb'))
    .reduce((kb, m) => kb + m.rssKb, 0);
  const fileMb = fs.statSync(path.join(dir, 'data.mdb')).size / 1048576;
  console.log(JSON.stringify({ rows: ROWS, file_mb: Math.round(fileMb), mapped_mb: Math.round(mappedKb / 1024) }));
} finally {
  await storage.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
