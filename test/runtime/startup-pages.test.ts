// runtime/startup-pages.ts: which mappings the sidecar may drop once started, and, in a real process, that
// dropping them gives back the executable's pages, keeps every page the process wrote, and that the code
// whose pages went still runs (they map back on use).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import t from 'tap';
import { parseSmaps, releasable, releaseStartupPages } from '../../src/runtime/startup-pages.js';

const SMAPS = `00400000-00b6f000 r--p 00000000 fd:01 1234                               /usr/bin/node
Size:               7612 kB
Rss:                7036 kB
Anonymous:             0 kB
00b72000-025fe000 r-xp 00772000 fd:01 1234                               /usr/bin/node
Rss:               22648 kB
Anonymous:             0 kB
0563a000-0563e000 r--p 0523a000 fd:01 1234                               /usr/bin/node
Rss:                  16 kB
Anonymous:            16 kB
0563e000-0565d000 rw-p 0523e000 fd:01 1234                               /usr/bin/node
Rss:                 124 kB
Anonymous:           120 kB
0565d000-0566d000 r--p 0525d000 fd:01 1234                               /usr/bin/node
Rss:                   0 kB
Anonymous:             0 kB
2be00000-2ce00000 rw-p 00000000 00:00 0                                  [heap]
Rss:                8476 kB
Anonymous:          8476 kB
7f0000000000-7f0000400000 r--s 00000000 fd:01 99                         /tmp/led/data.mdb
Rss:                2188 kB
Anonymous:             0 kB
7f1000000000-7f1000100000 rw-p 00000000 00:00 0 
Rss:                1024 kB
Anonymous:          1024 kB
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   8 kB
Anonymous:             0 kB
`;

t.test('parseSmaps reads each mapping\'s range, permissions, file and the two sizes', async (t) => {
  const maps = parseSmaps(SMAPS);
  t.equal(maps.length, 9);
  t.same(maps[0], { start: 0x400000n, end: 0xb6f000n, perms: 'r--p', path: '/usr/bin/node', rssKb: 7036, anonymousKb: 0 });
  t.same(maps[2], { start: 0x563a000n, end: 0x563e000n, perms: 'r--p', path: '/usr/bin/node', rssKb: 16, anonymousKb: 16 });
  t.equal(maps[6].path, '/tmp/led/data.mdb');
  t.equal(maps[7].path, '', 'anonymous memory has no name');
});

t.test('only private, read-only, never-written file mappings holding pages are releasable', async (t) => {
  const chosen = parseSmaps(SMAPS).filter(releasable).map((m) => m.start);
  t.same(chosen, [0x400000n, 0xb72000n], 'the binary\'s read-only data and code');
  // Left alone: relocated read-only data (written pages would read back unrelocated), writable data,
  // nothing resident, the heap, the ledger's shared map, anonymous memory, the vDSO.
});

t.test('in a real process: the executable\'s pages go, written pages stay, and the code runs on', async (t) => {
  const module = fileURLToPath(new URL('../../dist/runtime/startup-pages.js', import.meta.url));
  const script = `
    import { readFileSync } from 'node:fs';
    import { createHash } from 'node:crypto';
    const { parseSmaps, releasable, releaseStartupPages } = await import(${JSON.stringify(module)});
    const read = () => parseSmaps(readFileSync('/proc/self/smaps', 'utf8'));
    const before = read();
    const released = await releaseStartupPages();
    const after = read();
    const digest = createHash('sha256').update(JSON.stringify({ after: [1, 'two', { three: 3 }] })).digest('hex');
    const exe = (ms, pick) => ms.filter((m) => m.path === process.execPath && pick(m)).reduce((s, m) => s + m.rssKb, 0);
    const written = (ms) => ms.filter((m) => m.anonymousKb > 0 && m.path.startsWith('/')).map((m) => [m.start.toString(16), m.anonymousKb]);
    const gone = before.filter(releasable).map((m) => m.start);
    console.log(JSON.stringify({
      released,
      exeBefore: exe(before, releasable),
      exeAfter: exe(after, (m) => gone.includes(m.start)),
      writtenBefore: written(before),
      writtenAfter: written(after),
      digest,
    }));`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
  const r = JSON.parse(stdout) as { released: { mappings: number; kb: number }; exeBefore: number; exeAfter: number; writtenBefore: Array<[string, number]>; writtenAfter: Array<[string, number]>; digest: string };
  t.ok(r.released.mappings > 0 && r.released.kb >= r.exeBefore, `released ${r.released.kb} kB in ${r.released.mappings} mappings`);
  t.ok(r.exeBefore > 4096, `the executable had ${r.exeBefore} kB in releasable mappings`);
  t.ok(r.exeAfter < r.exeBefore / 2, `the executable's released mappings hold ${r.exeAfter} kB after (${r.exeBefore} before)`);
  const before = new Map(r.writtenBefore);
  for (const [start, kb] of r.writtenAfter) if (before.has(start)) t.ok(kb >= before.get(start)!, `written pages at ${start} kept`);
  t.ok(r.writtenBefore.length > 0, 'the process had written file-backed pages (relocations, data) to keep');
  t.equal(r.digest, createHash('sha256').update(JSON.stringify({ after: [1, 'two', { three: 3 }] })).digest('hex'), 'the process works after its pages went');
});

t.test('without a readable smaps there is nothing to release', async (t) => {
  t.equal(await releaseStartupPages('/nonexistent/smaps'), null);
});
