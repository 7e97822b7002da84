import { createRequire } from 'node:module';

/** What koffi (docs/dependencies.md) gives the callers of libc here. */
export interface Koffi {
  load(path: null): { func(signature: string): unknown };
  view(pointer: unknown, length: number): ArrayBuffer;
  address(pointer: unknown): bigint;
}

let koffi: Koffi | null | undefined;

/**
 * libc's functions by C signature, through koffi, with koffi itself: null where they cannot be had (not Linux, or
 * the addon does not load), and the caller does without. Node offers neither madvise(2) nor mmap(2). koffi is
 * loaded on the first call, so only a process that needs one of them pays for it.
 */
export function libcFunctions<T extends Record<string, unknown>>(signatures: { [K in keyof T]: string }): { koffi: Koffi; fns: T } | null {
  if (koffi === undefined) {
    koffi = null;
    if (process.platform === 'linux') {
      try {
        koffi = createRequire(import.meta.url)('koffi') as Koffi;
      } catch {
        koffi = null;
      }
    }
  }
  if (koffi === null) return null;
  try {
    // The process's own symbols: these are libc's, which the node binary links (glibc or musl alike).
    const self = koffi.load(null);
    const fns = {} as Record<string, unknown>;
    for (const [name, signature] of Object.entries(signatures)) fns[name] = self.func(signature as string);
    return { koffi, fns: fns as T };
  } catch {
    return null;
  }
}
