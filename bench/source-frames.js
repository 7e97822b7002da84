// Names a V8 profile's frames (CPU or heap sampling) after this repository's sources: the sidecar runs as a
// minified bundle (dist/sidecar-bundle), whose source maps give each frame's file under src/, its line and the
// function's own name. Used by bench/sidecar-profile.js and bench/sidecar-allocations.js.
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';

/** A frame's name and where it is: this repository's source file and line, a package, or Node's own module. */
export function frameNamer() {
  const maps = new Map();
  const mapOf = (url) => {
    if (!url.startsWith('file://')) return null;
    if (!maps.has(url)) {
      const path = `${fileURLToPath(url)}.map`;
      maps.set(url, existsSync(path) ? new SourceMap(JSON.parse(readFileSync(path, 'utf8'))) : null);
    }
    return maps.get(url);
  };
  return ({ functionName, url, lineNumber, columnNumber }) => {
    const entry = mapOf(url)?.findEntry(lineNumber, columnNumber);
    const source = entry?.originalSource;
    // The bundle is minified: the map holds the function's own name.
    const name = (source && entry.name) || functionName || '(anonymous)';
    if (source) {
      const file = source.replace(/^.*?\/(src|node_modules)\//, '$1/');
      return { fn: `${name} ${file}:${entry.originalLine + 1}`, file: file.startsWith('node_modules/') ? packageOf(file) : file };
    }
    if (url === '') return { fn: name, file: /^\((garbage collector|idle|program|root)\)$/.test(name) ? name : '(native)' };
    const file = url.startsWith('node:') ? url : url.replace(/^.*\/node_modules\//, 'node_modules/');
    return { fn: `${name} ${file}:${lineNumber + 1}`, file: file.startsWith('node_modules/') ? packageOf(file) : file };
  };
}

function packageOf(file) {
  const parts = file.split('/');
  return parts.slice(0, parts[1].startsWith('@') ? 3 : 2).join('/');
}

