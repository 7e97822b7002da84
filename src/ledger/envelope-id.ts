import { randomFillSync } from 'node:crypto';

const pool = Buffer.allocUnsafe(16 * 256);
let poolOffset = pool.length;
let lastMs = 0;
let counter = 0;

/**
 * A new envelope id: a UUID version 7 (RFC 9562), i.e. 48 bits of Unix milliseconds, then a 12-bit
 * per-millisecond counter (method 1), then 62 random bits. Ids created later sort later, so the ledger's
 * envelope index grows at its right edge instead of dirtying random pages: measured about 1.15x ledger
 * append throughput against random v4 ids at 200k rows (bench/ledger.js), a gap that widens as the
 * index outgrows memory. A clock that stands still or steps back keeps the order (the counter, then
 * the last millisecond, carry on).
 */
export function newEnvelopeId(now: number = Date.now()): string {
  if (poolOffset + 16 > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const b = pool.subarray(poolOffset, poolOffset + 16);
  poolOffset += 16;
  if (now > lastMs) {
    lastMs = now;
    counter = b[6] & 0x03; // random start keeps ids from one ms unguessable without wasting the counter range
  } else if (++counter > 0xfff) {
    lastMs++; // counter exhausted: borrow the next millisecond so order is kept
    counter = 0;
  }
  const ms = lastMs;
  b[0] = Math.floor(ms / 2 ** 40) & 0xff;
  b[1] = Math.floor(ms / 2 ** 32) & 0xff;
  b[2] = (ms >>> 24) & 0xff;
  b[3] = (ms >>> 16) & 0xff;
  b[4] = (ms >>> 8) & 0xff;
  b[5] = ms & 0xff;
  b[6] = 0x70 | (counter >>> 8);
  b[7] = counter & 0xff;
  b[8] = 0x80 | (b[8] & 0x3f);
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
