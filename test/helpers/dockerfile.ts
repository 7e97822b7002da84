// A Dockerfile and .dockerignore reader for the image tests: Docker is not available where the tests run,
// so the image is checked by reading its recipe (test/image/dockerfile.test.ts) and by running what its
// last stage holds (test/image/production-install.test.ts).
import picomatch from 'picomatch';

export interface Instruction {
  keyword: string;
  /** The arguments, continuation lines joined with a space. */
  args: string;
  /** 1-based line of the keyword. */
  line: number;
}

export interface Stage {
  /** `AS <name>`, or null. */
  name: string | null;
  /** The FROM image with the global ARG defaults substituted. */
  image: string;
  line: number;
  instructions: Instruction[];
}

export interface Dockerfile {
  /** ARGs declared before the first FROM, with their defaults. */
  globalArgs: Map<string, string>;
  stages: Stage[];
}

/** Splits a Dockerfile into instructions: `\` continues a line, and comment lines inside a continuation are dropped, as BuildKit does. */
export function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let current: { parts: string[]; line: number } | null = null;
  text.split(/\r?\n/).forEach((raw, i) => {
    const trimmed = raw.trim();
    // Blank lines end nothing: BuildKit skips them inside a continuation too (with a warning).
    if (trimmed.startsWith('#') || trimmed === '') return;
    const continued = /\\$/.test(trimmed);
    const body = continued ? trimmed.slice(0, -1).trim() : trimmed;
    if (current === null) current = { parts: [], line: i + 1 };
    if (body !== '') current.parts.push(body);
    if (!continued) {
      const joined = current.parts.join(' ');
      const m = /^(\S+)\s*(.*)$/.exec(joined);
      if (m) out.push({ keyword: m[1].toUpperCase(), args: m[2], line: current.line });
      current = null;
    }
  });
  return out;
}

const substitute = (s: string, vars: Map<string, string>): string =>
  s.replace(/\$\{(\w+)\}|\$(\w+)/g, (whole, a: string | undefined, b: string | undefined) => vars.get((a ?? b)!) ?? whole);

export function parseDockerfile(text: string): Dockerfile {
  const globalArgs = new Map<string, string>();
  const stages: Stage[] = [];
  for (const ins of instructions(text)) {
    if (ins.keyword === 'FROM') {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?\s*$/i.exec(ins.args);
      stages.push({ name: m?.[2] ?? null, image: substitute(m?.[1] ?? ins.args, globalArgs), line: ins.line, instructions: [] });
    } else if (stages.length === 0) {
      if (ins.keyword === 'ARG') {
        const [name, value = ''] = ins.args.split('=', 2);
        globalArgs.set(name.trim(), value.trim());
      }
    } else {
      stages[stages.length - 1].instructions.push(ins);
    }
  }
  return { globalArgs, stages };
}

/** The JSON (exec) form of ENTRYPOINT/CMD/RUN as an array, or null for the shell form. */
export function execForm(args: string): string[] | null {
  if (!args.trim().startsWith('[')) return null;
  try {
    const v: unknown = JSON.parse(args);
    return Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : null;
  } catch {
    return null;
  }
}

export interface Copy {
  from: string | null;
  sources: string[];
  dest: string;
  line: number;
}

/** COPY's flags, sources and destination (both the shell and the JSON form). */
export function parseCopy(ins: Instruction): Copy {
  const words = execForm(ins.args) ?? ins.args.split(/\s+/).filter((w) => w !== '');
  let from: string | null = null;
  const rest: string[] = [];
  for (const w of words) {
    if (w.startsWith('--from=')) from = w.slice('--from='.length);
    else if (!w.startsWith('--')) rest.push(w);
  }
  return { from, sources: rest.slice(0, -1), dest: rest[rest.length - 1] ?? '', line: ins.line };
}

/** ENV in both forms (`ENV A=1 B=2`, legacy `ENV A 1`), as name/value pairs. */
export function parseEnv(ins: Instruction): Array<[string, string]> {
  if (!ins.args.includes('=')) {
    const [name, ...value] = ins.args.split(/\s+/);
    return [[name, value.join(' ')]];
  }
  const out: Array<[string, string]> = [];
  for (const m of ins.args.matchAll(/(\w+)=("(?:[^"\\]|\\.)*"|\S*)/g)) out.push([m[1], m[2].replace(/^"(.*)"$/, '$1')]);
  return out;
}

/** The working directory an instruction of `stage` runs in (WORKDIR before it; relative ones append). */
export function workdirAt(stage: Stage, index = stage.instructions.length): string {
  let dir = '/';
  for (const ins of stage.instructions.slice(0, index)) {
    if (ins.keyword !== 'WORKDIR') continue;
    dir = ins.args.startsWith('/') ? ins.args : `${dir.replace(/\/$/, '')}/${ins.args}`;
  }
  return dir;
}

/**
 * A .dockerignore as Docker applies it: patterns in order, the last one matching a path (or one of its
 * parent directories) decides, `!` lets a path back in.
 */
export function dockerignore(text: string): (path: string) => boolean {
  const rules = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!');
      const pattern = (negate ? l.slice(1) : l).trim().replace(/^\/+/, '').replace(/\/+$/, '');
      return { negate, match: picomatch(pattern, { dot: true }) };
    });
  return (path: string) => {
    const parts = path.replace(/^\.?\/+/, '').replace(/\/+$/, '').split('/');
    let ignored = false;
    for (const rule of rules) {
      // A pattern matching a parent directory covers everything under it.
      for (let i = 1; i <= parts.length; i++) {
        if (rule.match(parts.slice(0, i).join('/'))) {
          ignored = !rule.negate;
          break;
        }
      }
    }
    return ignored;
  };
}
