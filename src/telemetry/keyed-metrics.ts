import type { Metric, Registry, RegistryContentType } from 'prom-client';

/**
 * A counter and a histogram for the series every governed call updates, found by their label values and
 * nothing else. prom-client finds a series by validating the labels object, sorting its names and hashing
 * it on every update: in the sidecar's CPU profile that was ~13 µs and ~1.2 KB of garbage a call for its
 * three updates (docs/performance.md, "Session 23"). Here a series is found by a Map lookup per label
 * value, and its labels object is built once, when the series is first seen.
 *
 * They register in a prom-client Registry like its own metrics and expose the same text: the registry
 * formats the values these return (`getForPromString`, `get`) exactly as it formats its own Counter's and
 * Histogram's.
 */
type Labels = Record<string, string | number>;

/** One exported sample, in the shape prom-client's own metrics hand their registry. */
interface Sample {
  labels: Labels;
  sharedLabels?: Labels;
  value: number;
  metricName?: string;
  /** prom-client's histogram buckets carry one (null without exemplars); JSON readers see the same keys. */
  exemplar?: null;
}

interface Exported {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  values: Sample[];
}

interface Series {
  labels: Labels;
  count: number;
  sum: number;
  /** Observations per bucket, not cumulative (the export adds them up); empty for a counter. */
  buckets: number[];
}

type Level = Map<string, Level | Series>;

abstract class KeyedMetric {
  readonly aggregator = 'sum' as const;
  private root: Level = new Map();
  /** Every series, in the order first seen (the order prom-client exports its own in). */
  protected all: Series[] = [];

  constructor(
    /** Not readonly: the registry renames a counter in OpenMetrics output. */
    public name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
    private readonly bucketCount: number,
    registry: Registry<RegistryContentType>,
  ) {
    registry.registerMetric(this as unknown as Metric);
  }

  /**
   * The series of these label values (in labelNames order), made on first use. One Map level per label:
   * a joined key would be a new string to hash on every call, while label values are mostly the same
   * string objects each time (route templates, agent ids), whose hashes V8 keeps.
   */
  protected at(values: readonly string[]): Series {
    let level: Level = this.root;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      let next = level.get(values[i]) as Level | undefined;
      if (next === undefined) level.set(values[i], (next = new Map()));
      level = next;
    }
    let s = level.get(values[last]) as Series | undefined;
    if (s === undefined) {
      const labels: Record<string, string> = {};
      for (let i = 0; i < this.labelNames.length; i++) labels[this.labelNames[i]] = values[i];
      s = { labels, count: 0, sum: 0, buckets: new Array<number>(this.bucketCount).fill(0) };
      level.set(values[last], s);
      this.all.push(s);
    }
    return s;
  }

  reset(): void {
    this.root = new Map();
    this.all = [];
  }

  abstract readonly type: 'counter' | 'histogram';
  protected abstract values(shared: boolean): Sample[];

  /** What the registry's text exposition reads: a series' labels ride as shared labels, as prom-client's histogram does. */
  getForPromString(): Promise<Exported> {
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.values(true) });
  }

  /** What getMetricsAsJSON reads: plain labels. */
  get(): Promise<Exported> {
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.values(false) });
  }
}

export class KeyedCounter extends KeyedMetric {
  readonly type = 'counter' as const;

  constructor(o: { name: string; help: string; labelNames: readonly string[]; registry: Registry<RegistryContentType> }) {
    super(o.name, o.help, o.labelNames, 0, o.registry);
  }

  inc(values: readonly string[], by = 1): void {
    this.at(values).count += by;
  }

  protected values(): Sample[] {
    return this.all.map((s) => ({ labels: { ...s.labels }, value: s.count }));
  }
}

export class KeyedHistogram extends KeyedMetric {
  readonly type = 'histogram' as const;
  private readonly upperBounds: readonly number[];

  constructor(o: { name: string; help: string; labelNames: readonly string[]; buckets: readonly number[]; registry: Registry<RegistryContentType> }) {
    const bounds = [...o.buckets].sort((a, b) => a - b);
    super(o.name, o.help, o.labelNames, bounds.length, o.registry);
    this.upperBounds = bounds;
  }

  observe(values: readonly string[], v: number): void {
    const s = this.at(values);
    s.count++;
    s.sum += v;
    const bounds = this.upperBounds;
    for (let i = 0; i < bounds.length; i++) {
      if (v <= bounds[i]) {
        s.buckets[i]++;
        return;
      }
    }
  }

  protected values(shared: boolean): Sample[] {
    const out: Sample[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.all) {
      const row = (own: Labels, value: number, metricName: string): Sample => {
        const sample: Sample = shared ? { labels: own, sharedLabels: s.labels, value, metricName } : { labels: { ...own, ...s.labels }, value, metricName };
        if (metricName === bucket) sample.exemplar = null;
        return sample;
      };
      let acc = 0;
      for (let i = 0; i < this.upperBounds.length; i++) {
        acc += s.buckets[i];
        out.push(row({ le: this.upperBounds[i] }, acc, bucket));
      }
      out.push(row({ le: '+Inf' }, s.count, bucket), row({}, s.sum, `${this.name}_sum`), row({}, s.count, `${this.name}_count`));
    }
    return out;
  }
}
