import { readFileSync } from 'node:fs';
import { libcFunctions } from '../ledger/libc.js';

/**
 * Gives back the pages of the executable and its libraries that only starting up touched.
 *
 * Why: a started sidecar has ~45 MB of the `node` binary mapped in (RssFile), because the kernel maps a
 * file's pages 64 KB around each fault, and loading, compiling and wiring the modules reaches far into
 * the binary's code and read-only data. Serving calls touches about half of that. Those pages count in
 * the pod's RSS (VmHWM, the figure issue 15's memory goal is stated in) for as long as they stay mapped.
 * madvise(MADV_DONTNEED) on a private, never-written file mapping drops its pages from this process's
 * page tables; they stay in the page cache, and a later touch maps them back with a minor fault, so
 * nothing changes but which pages this process holds (docs/performance.md, "Session 37").
 */

/** madvise(2) advice number on Linux. */
const MADV_DONTNEED = 4;

export interface Mapping {
  start: bigint;
  end: bigint;
  /** `r-xp` and the like, as /proc/<pid>/smaps prints them. */
  perms: string;
  /** The file mapped, or a bracketed name (`[heap]`), or '' for anonymous memory. */
  path: string;
  rssKb: number;
  /** Copy-on-write pages: the process wrote to them, and they no longer match the file. */
  anonymousKb: number;
}

export interface PagesReleased {
  /** Mappings the advice was given for. */
  mappings: number;
  /** Their resident kB just before. */
  kb: number;
}

const HEADER = /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+ *(.*)$/;

/** The mappings of a /proc/<pid>/smaps text, with the two fields the choice needs. */
export function parseSmaps(text: string): Mapping[] {
  const out: Mapping[] = [];
  let cur: Mapping | null = null;
  for (const line of text.split('\n')) {
    const h = HEADER.exec(line);
    if (h !== null) {
      cur = { start: BigInt('0x' + h[1]), end: BigInt('0x' + h[2]), perms: h[3], path: h[4], rssKb: 0, anonymousKb: 0 };
      out.push(cur);
    } else if (cur !== null) {
      if (line.startsWith('Rss:')) cur.rssKb = kb(line);
      else if (line.startsWith('Anonymous:')) cur.anonymousKb = kb(line);
    }
  }
  return out;
}

function kb(line: string): number {
  return Number.parseInt(line.slice(line.indexOf(':') + 1), 10) || 0;
}

/**
 * Whether dropping a mapping's pages loses nothing: backed by a file, private, not writable and with no
 * page written. A written page of a read-only mapping exists (relocated data the loader then protected,
 * RELRO): dropped, it would read back as the file's unrelocated bytes, so any mapping holding one is left
 * alone, as are shared mappings (the ledger's file) and writable ones.
 */
export function releasable(m: Mapping): boolean {
  return m.path.startsWith('/') && m.perms[1] !== 'w' && m.perms[3] === 'p' && m.anonymousKb === 0 && m.rssKb > 0;
}

type Madvise = (addr: bigint, length: number, advice: number) => number;

/** madvise(2) through koffi, or null where it cannot be had (not Linux, or the addon does not load). */
function loadMadvise(): Madvise | null {
  return libcFunctions<{ madvise: Madvise }>({ madvise: 'int madvise(uintptr_t addr, size_t length, int advice)' })?.fns.madvise ?? null;
}

/**
 * Drops the releasable mappings' pages (see above). Null where madvise cannot be called; otherwise what
 * was released. Safe while other threads run: a page they touch again is mapped back from the page cache.
 */
export async function releaseStartupPages(smapsPath = '/proc/self/smaps'): Promise<PagesReleased | null> {
  const madvise = loadMadvise();
  if (madvise === null) return null;
  let text: string;
  try {
    text = readFileSync(smapsPath, 'utf8');
  } catch {
    return null;
  }
  let mappings = 0;
  let released = 0;
  for (const m of parseSmaps(text)) {
    if (!releasable(m)) continue;
    if (madvise(m.start, Number(m.end - m.start), MADV_DONTNEED) !== 0) continue;
    mappings++;
    released += m.rssKb;
  }
  return { mappings, kb: released };
}
