import { createHash, createHmac, randomBytes } from 'node:crypto';
import t from 'tap';
import { canonicalBytes, canonicalHeader } from '../../src/ledger/canonical.js';
import { ChainWalker, GENESIS_HASH, hmacSha256, payloadCommitment, rowHash, stitchSegments, verifyChain } from '../../src/ledger/chain.js';
import { RowBuilder } from '../../src/ledger/row-builder.js';
import { readRowLayout } from '../../src/ledger/row-format.js';
import { eraseRow, readAuditRow } from '../../src/ledger/row-reader.js';
import { entry } from './fixtures/ledger-suite.js';

function buildChain(n: number, key?: Buffer, from: { seq: number; hash: string | null } = { seq: 0, hash: null }): Buffer[] {
  const builder = new RowBuilder(from, key, 'test@chain');
  return Array.from({ length: n }, (_, i) => Buffer.from(builder.build(entry({ payload: { i, text: 'payload MARKER' } })).bytes));
}

const pairs = (rows: Buffer[]): Array<[unknown, Buffer]> => rows.map((b, i) => [i + 1, b]);
const headOf = (rows: Buffer[]) => ({ seq: rows.length, hash: readAuditRow(rows[rows.length - 1]).hash });

t.test('HMAC and hashing primitives match node:crypto', async (t) => {
  for (const keyLen of [16, 24, 32, 64, 100]) {
    for (const msgLen of [0, 1, 63, 64, 1000, 70_000]) {
      const key = randomBytes(keyLen);
      const msg = randomBytes(msgLen);
      t.ok(hmacSha256(key, msg).equals(createHmac('sha256', key).update(msg).digest()), `key ${keyLen} msg ${msgLen}`);
    }
  }
  const prev = randomBytes(32);
  const header = Buffer.from('{"a":1}');
  const commitment = randomBytes(32);
  t.same(rowHash(prev, header, commitment), createHash('sha256').update(prev).update(header).update(commitment).digest());
  t.equal(GENESIS_HASH, '0'.repeat(64));
});

t.test('a stored row follows the documented formulas', async (t) => {
  const rows = buildChain(2);
  for (const b of rows) {
    const row = readAuditRow(b);
    const layout = readRowLayout(b)!;
    const salt = b.subarray(layout.saltStart, layout.saltEnd);
    t.equal(salt.length, 16);
    const payload = JSON.parse(b.toString('utf8', layout.payloadStart, layout.payloadEnd));
    t.equal(payloadCommitment(salt, canonicalBytes(payload)).toString('hex'), row.commitment, 'commitment = HMAC(salt, canonical payload)');
    const { prev_hash, hash, commitment, encrypted, ...header } = row;
    void encrypted;
    const recomputed = rowHash(Buffer.from(prev_hash, 'hex'), Buffer.from(canonicalHeader(header), 'utf8'), Buffer.from(commitment, 'hex'));
    t.equal(recomputed.toString('hex'), hash, 'hash = SHA-256(prev ‖ canonical header ‖ commitment)');
  }
  t.equal(readAuditRow(rows[0]).prev_hash, GENESIS_HASH);
  t.equal(readAuditRow(rows[1]).prev_hash, readAuditRow(rows[0]).hash);
});

t.test('a valid chain verifies; an empty one too', async (t) => {
  const rows = buildChain(5);
  t.same(verifyChain(pairs(rows), { expectedHead: headOf(rows) }), {
    valid: true, rows_checked: 5, first_invalid_seq: null, head_hash: readAuditRow(rows[4]).hash,
  });
  t.same(verifyChain([]), { valid: true, rows_checked: 0, first_invalid_seq: null, head_hash: null });
});

for (const variant of ['plaintext', 'encrypted', 'erased'] as const) {
  t.test(`every single flipped byte of a row (${variant}) is found at that row`, async (t) => {
    const key = variant === 'encrypted' ? randomBytes(32) : undefined;
    const rows = buildChain(5, key);
    if (variant === 'erased') rows[2] = eraseRow(rows[2]);
    t.equal(verifyChain(pairs(rows), { payloadKey: key }).valid, true);
    const target = rows[2];
    let checked = 0;
    for (let i = 0; i < target.length; i++) {
      for (const mask of [0x01, 0x80]) {
        const tampered = rows.slice();
        tampered[2] = Buffer.from(target);
        tampered[2][i] ^= mask;
        const r = verifyChain(pairs(tampered), { payloadKey: key, expectedHead: headOf(rows) });
        if (r.first_invalid_seq !== 3 || r.valid) {
          t.fail(`byte ${i} mask ${mask}: ${JSON.stringify(r)}`);
          return;
        }
        checked++;
      }
    }
    t.equal(checked, target.length * 2, `all ${target.length} bytes checked`);
  });
}

t.test('a truncated or extended value is found at its row', async (t) => {
  const rows = buildChain(4);
  for (const altered of [rows[1].subarray(0, rows[1].length - 1), Buffer.concat([rows[1], Buffer.from([0])]), Buffer.alloc(0), Buffer.from('{}')]) {
    const tampered = rows.slice();
    tampered[1] = altered;
    t.equal(verifyChain(pairs(tampered)).first_invalid_seq, 2);
  }
});

t.test('a missing seq is reported as that seq', async (t) => {
  const rows = buildChain(5);
  const all = pairs(rows);
  for (const missing of [1, 3, 4]) {
    const r = verifyChain(all.filter(([k]) => k !== missing), { expectedHead: headOf(rows) });
    t.same([r.valid, r.first_invalid_seq], [false, missing], `without seq ${missing}`);
  }
  const r = verifyChain(all.slice(0, 4), { expectedHead: headOf(rows) });
  t.same([r.valid, r.first_invalid_seq, r.head_hash], [false, 5, readAuditRow(rows[3]).hash], 'a cut tail is found with the recorded head');
  t.equal(verifyChain(all.slice(0, 4)).valid, true, 'without a recorded head a cut tail looks like a shorter chain');
});

t.test('swapped rows are found at the first of them', async (t) => {
  const rows = buildChain(5);
  const swapped = pairs(rows);
  [swapped[1][1], swapped[2][1]] = [swapped[2][1], swapped[1][1]];
  t.equal(verifyChain(swapped).first_invalid_seq, 2);
  const reversed = pairs(rows.slice().reverse());
  t.equal(verifyChain(reversed).first_invalid_seq, 1);
});

t.test('an inserted row is found at the seq it takes', async (t) => {
  const rows = buildChain(5);
  const all = pairs(rows);
  const between = [...all.slice(0, 2), [2.5, rows[1]] as [unknown, Buffer], ...all.slice(2)];
  t.equal(verifyChain(between).first_invalid_seq, 3, 'extra key between seq 2 and 3');
  for (const intruder of [rows[1], rows[3], randomBytes(300), buildChain(1)[0]]) {
    const shifted: Array<[unknown, Buffer]> = [...all.slice(0, 2), [3, intruder], ...rows.slice(2).map((b, i) => [i + 4, b] as [unknown, Buffer])];
    t.equal(verifyChain(shifted).first_invalid_seq, 3, 'rows renumbered around an intruder');
  }
  // A forged row with a correct hash that links to seq 2 is indistinguishable from a real one; the
  // break shows at the next row, which no longer links.
  const forged = buildChain(1, undefined, { seq: 2, hash: readAuditRow(rows[1]).hash })[0];
  const withForged: Array<[unknown, Buffer]> = [...all.slice(0, 2), [3, forged], ...rows.slice(2).map((b, i) => [i + 4, b] as [unknown, Buffer])];
  t.equal(verifyChain(withForged).first_invalid_seq, 4);
  t.equal(verifyChain([...all, [6, buildChain(1, undefined, headOf(rows))[0]]], { expectedHead: headOf(rows) }).first_invalid_seq, 6, 'a row beyond the recorded head');
});

t.test('encrypted rows need the key', async (t) => {
  const key = randomBytes(32);
  const rows = buildChain(3, key);
  t.equal(verifyChain(pairs(rows), { payloadKey: key }).valid, true);
  t.equal(verifyChain(pairs(rows)).first_invalid_seq, 1, 'no key: the payload cannot be authenticated');
  t.equal(verifyChain(pairs(rows), { payloadKey: randomBytes(32) }).first_invalid_seq, 1, 'wrong key');
  t.notOk(rows[0].includes(Buffer.from('MARKER')), 'no plaintext in an encrypted row');
});

t.test('verification never throws', async (t) => {
  const rows = buildChain(3);
  const weird: Array<[unknown, unknown]> = [[1, rows[0]], [2, null], [3, 'text']];
  t.equal(verifyChain(weird as Array<[unknown, Buffer]>).first_invalid_seq, 2);
  function* failing(): Generator<[unknown, Buffer]> {
    yield [1, rows[0]];
    throw new Error('disk gone');
  }
  t.same(verifyChain(failing()), { valid: false, rows_checked: 2, first_invalid_seq: 2, head_hash: readAuditRow(rows[0]).hash });
  t.equal(verifyChain([['1', rows[0]]]).first_invalid_seq, 1, 'a string key is not seq 1');
});

t.test('segments of a chain verify independently and stitch to the single-walk result', async (t) => {
  const rows = buildChain(9);
  const split = (all: Array<[unknown, Buffer]>, starts: number[]) =>
    starts.map((start, i) => {
      const end = starts[i + 1] ?? Infinity;
      const walker = new ChainWalker({ startSeq: start, expectedHead: i === starts.length - 1 ? headOf(rows) : null });
      for (const [k, v] of all) if (typeof k === 'number' && k >= start && k < end && !walker.step(k, v)) break;
      return { result: walker.finish(), info: walker.segmentInfo() };
    });
  const cases: Array<[string, Array<[unknown, Buffer]>]> = [
    ['intact', pairs(rows)],
    ['flipped row 4', pairs(rows).map(([k, v]) => [k, k === 4 ? Buffer.concat([v.subarray(0, 50), Buffer.from([v[50] ^ 1]), v.subarray(51)]) : v])],
    ['missing row 3 (end of a segment)', pairs(rows).filter(([k]) => k !== 3)],
    ['missing row 4 (start of a segment)', pairs(rows).filter(([k]) => k !== 4)],
    ['swapped 3 and 4 (across segments)', pairs(rows).map(([k, v]) => [k, k === 3 ? rows[3] : k === 4 ? rows[2] : v])],
    ['cut tail', pairs(rows).slice(0, 7)],
    ['only two rows', pairs(rows).slice(0, 2)],
  ];
  for (const [name, all] of cases) {
    const single = verifyChain(all, { expectedHead: headOf(rows) });
    const stitched = stitchSegments(split(all, [1, 4, 7]));
    t.same([stitched.valid, stitched.first_invalid_seq, stitched.head_hash], [single.valid, single.first_invalid_seq, single.head_hash], name);
  }
  const info = split(pairs(rows), [1, 4, 7])[1].info;
  t.same(info, { start_seq: 4, first_prev_hash: readAuditRow(rows[2]).hash, last_seq: 6, had_rows: true });
});
