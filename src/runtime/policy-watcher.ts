import { createHash } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { PolicyLoadError } from '../policy/errors.js';
import { readYamlDir } from '../policy/loader.js';
import type { PolicySource } from '../policy/pack.js';
import type { FileSyncReport, PolicyRegistry } from './policy-registry.js';

export interface PolicyWatcherOptions {
  dir: string;
  registry: PolicyRegistry;
  /** Quiet time after the last file event before the directory is read (an editor writes in bursts). */
  debounceMs?: number;
  /** Fallback poll: fs.watch misses events on some volumes (network mounts, some container overlays). */
  intervalMs: number;
  /** Called after every pass that found a change, with what it did (errors included). */
  onReport: (report: FileSyncReport) => void;
}

/** Identity of the directory's pack files: names and contents, so a pass over an unchanged directory does nothing. */
export function fingerprint(sources: readonly PolicySource[]): string {
  const h = createHash('sha256');
  for (const s of [...sources].sort((a, b) => (a.origin < b.origin ? -1 : 1))) h.update(s.origin).update('\0').update(s.text).update('\0');
  return h.digest('hex');
}

/**
 * Hot reload of GOV_POLICY_DIR: fs.watch with a debounce, plus a periodic check, each pass reading the
 * directory and handing a changed one to PolicyRegistry.syncFiles (non-strict: a bad file is reported and
 * its pack keeps its last good version). Passes never overlap; close() stops both triggers and waits for a
 * pass in progress, so shutdown never races a write to the store or the ledger.
 */
export class PolicyDirWatcher {
  private fsWatcher: FSWatcher | null = null;
  private timer: NodeJS.Timeout | null = null;
  private debounce: NodeJS.Timeout | null = null;
  private running: Promise<FileSyncReport | null> | null = null;
  private again = false;
  private closed = false;

  constructor(
    private readonly o: PolicyWatcherOptions,
    private lastSeen: string,
  ) {}

  start(): void {
    try {
      this.fsWatcher = watch(this.o.dir, { persistent: false }, () => this.schedule());
      this.fsWatcher.on('error', () => {
        // The directory went away or the watch broke: the periodic check carries on alone.
        this.fsWatcher?.close();
        this.fsWatcher = null;
      });
    } catch {
      this.fsWatcher = null;
    }
    this.timer = setInterval(() => void this.check(), this.o.intervalMs);
    this.timer.unref();
  }

  private schedule(): void {
    if (this.closed) return;
    if (this.debounce !== null) clearTimeout(this.debounce);
    this.debounce = setTimeout(() => {
      this.debounce = null;
      void this.check();
    }, this.o.debounceMs ?? 150);
    this.debounce.unref();
  }

  /** One pass now (tests and the periodic timer call it); null when the directory is as last seen. */
  check(): Promise<FileSyncReport | null> {
    if (this.closed) return Promise.resolve(null);
    if (this.running !== null) {
      // A change may have landed after the running pass read the directory: look once more after it.
      this.again = true;
      return this.running;
    }
    this.running = this.pass().finally(() => {
      this.running = null;
      if (this.again && !this.closed) {
        this.again = false;
        void this.check();
      }
    });
    return this.running;
  }

  private async pass(): Promise<FileSyncReport | null> {
    let sources: PolicySource[];
    try {
      sources = await readYamlDir(this.o.dir);
    } catch (e) {
      const print = `unreadable:${(e as Error).message}`;
      if (print === this.lastSeen) return null;
      this.lastSeen = print;
      const report: FileSyncReport = { published: [], activated: [], kept: [], errors: [new PolicyLoadError(this.o.dir, [`cannot read policy directory: ${(e as Error).message}`])], policy_version: this.o.registry.current().version };
      this.o.onReport(report);
      return report;
    }
    const print = fingerprint(sources);
    if (print === this.lastSeen) return null;
    // A file caught mid-write may still parse (YAML cut at a rule boundary is a valid, shorter pack) and a
    // published version is immutable: act only on a directory that reads the same twice, a moment apart.
    await new Promise((resolve) => setTimeout(resolve, this.o.debounceMs ?? 150).unref());
    let settled: PolicySource[];
    try {
      settled = await readYamlDir(this.o.dir);
    } catch {
      this.again = true;
      return null;
    }
    if (this.closed) return null;
    if (fingerprint(settled) !== print) {
      this.again = true;
      return null;
    }
    let report: FileSyncReport;
    try {
      report = await this.o.registry.syncFiles(sources, false);
    } catch (e) {
      // The store or the ledger refused (closing, disk full): report it and try again on the next pass.
      report = { published: [], activated: [], kept: [], errors: [new PolicyLoadError(this.o.dir, [`reload failed: ${(e as Error).message}`])], policy_version: this.o.registry.current().version };
      this.o.onReport(report);
      return report;
    }
    this.lastSeen = print;
    this.o.onReport(report);
    return report;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.fsWatcher?.close();
    if (this.timer !== null) clearInterval(this.timer);
    if (this.debounce !== null) clearTimeout(this.debounce);
    await this.running?.catch(() => undefined);
  }
}
