// Loaded into a sidecar by bench/sidecar-ab.js with BENCH_AB_TOGGLE, as NODE_OPTIONS="--require <this file>": each
// SIGUSR2 turns the V8 flags named in GOV_TOGGLE_FLAGS (comma-separated, without dashes) off, or back on, through
// v8.setFlagsFromString, and then writes "on" or "off" to GOV_TOGGLE_STATE. Only flags V8 reads each time it acts
// take effect this way (`parallel-scavenge` and `concurrent-marking` do, traced with --trace-gc-nvp); the point is
// one process for both sides, so that the drift between two processes does not count as the flag's effect. The
// launcher's first `node` (which only prints the heap flags, GOV_SIDECAR_V8_SIZED=query) does nothing.
'use strict';
const FLAGS = process.env.GOV_TOGGLE_FLAGS;
const STATE = process.env.GOV_TOGGLE_STATE;

if (FLAGS && STATE && process.env.GOV_SIDECAR_V8_SIZED !== 'query') {
  const v8 = require('node:v8');
  const { writeFileSync } = require('node:fs');
  const names = FLAGS.split(',').filter(Boolean);
  let on = true;
  writeFileSync(STATE, 'on');
  process.on('SIGUSR2', () => {
    on = !on;
    for (const name of names) v8.setFlagsFromString(on ? `--${name}` : `--no-${name}`);
    writeFileSync(STATE, on ? 'on' : 'off');
  });
}
