import { libcFunctions, type Koffi } from './libc.js';

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

const PROT_READ_WRITE = 0x1 | 0x2;
const MAP_SHARED = 0x1;
/** (void *) -1, as koffi reads it back. */
const MAP_FAILED = (1n << 64n) - 1n;

let libc: { koffi: Koffi; fns: { mmap: Mmap; munmap: Munmap } } | null | undefined;

function mmapCalls(): { koffi: Koffi; fns: { mmap: Mmap; munmap: Munmap } } | null {
  if (libc === undefined) {
    libc = libcFunctions<{ mmap: Mmap; munmap: Munmap }>({
      mmap: 'void *mmap(void *addr, size_t length, int prot, int flags, int fd, int64_t offset)',
      munmap: 'int munmap(void *addr, size_t length)',
    });
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
    pointer = calls.fns.mmap(null, length, PROT_READ_WRITE, MAP_SHARED, fd, 0);
    const address = calls.koffi.address(pointer);
    if (address === MAP_FAILED || address === 0n || address === -1n) return null;
  } catch {
    return null;
  }
  let buf: Buffer;
  try {
    buf = Buffer.from(calls.koffi.view(pointer, length));
  } catch {
    calls.fns.munmap(pointer, length);
    return null;
  }
  let mapped = true;
  return {
    buf,
    unmap() {
      if (!mapped) return;
      mapped = false;
      calls.fns.munmap(pointer, length);
    },
  };
}
