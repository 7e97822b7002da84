import { createRequire } from 'node:module';

/**
 * A file mapped shared and writable (mmap(2) with MAP_SHARED), as a Buffer over the mapping. A store into it
 * is a store into the kernel's page cache: once it is done, a crash of the process loses none of it, as with a
 * write(2) that returned, and it costs no system call. Node has no mmap; koffi (docs/dependencies.md) calls libc's.
 */
export interface MappedFile {
  readonly buf: Buffer;
  /** Unmaps; `buf` must not be touched after this. */
  unmap(): void;
}

type Mmap = (addr: null, length: number, prot: number, flags: number, fd: number, offset: number) => unknown;
type Munmap = (addr: unknown, length: number) => number;
interface Koffi {
  load(path: null): { func(signature: string): unknown };
  view(pointer: unknown, length: number): ArrayBuffer;
  address(pointer: unknown): bigint;
}

const PROT_READ_WRITE = 0x1 | 0x2;
const MAP_SHARED = 0x1;
/** (void *) -1, as koffi reads it back. */
const MAP_FAILED = (1n << 64n) - 1n;

let libc: { koffi: Koffi; mmap: Mmap; munmap: Munmap } | null | undefined;

/** libc's mmap and munmap through koffi, or null where they cannot be had (not Linux, or the addon does not load). */
function mmapCalls(): { koffi: Koffi; mmap: Mmap; munmap: Munmap } | null {
  if (libc !== undefined) return libc;
  libc = null;
  if (process.platform !== 'linux') return libc;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as Koffi;
    // The process's own symbols: mmap is libc's, which the node binary links (glibc or musl alike).
    const self = koffi.load(null);
    libc = {
      koffi,
      mmap: self.func('void *mmap(void *addr, size_t length, int prot, int flags, int fd, int64_t offset)') as Mmap,
      munmap: self.func('int munmap(void *addr, size_t length)') as Munmap,
    };
  } catch {
    libc = null;
  }
  return libc;
}

/**
 * Maps the first `length` bytes of the open file `fd` (opened read-write, at least `length` long), or returns
 * null when the mapping cannot be had: the caller writes with write(2) instead.
 */
export function mapShared(fd: number, length: number): MappedFile | null {
  const calls = mmapCalls();
  if (calls === null || length <= 0) return null;
  let pointer: unknown;
  try {
    pointer = calls.mmap(null, length, PROT_READ_WRITE, MAP_SHARED, fd, 0);
    const address = calls.koffi.address(pointer);
    if (address === MAP_FAILED || address === 0n || address === -1n) return null;
  } catch {
    return null;
  }
  let buf: Buffer;
  try {
    buf = Buffer.from(calls.koffi.view(pointer, length));
  } catch {
    calls.munmap(pointer, length);
    return null;
  }
  let mapped = true;
  return {
    buf,
    unmap() {
      if (!mapped) return;
      mapped = false;
      calls.munmap(pointer, length);
    },
  };
}
