// Loaded into a sidecar by bench/sidecar-profile.js, as NODE_OPTIONS="--require <this file>", so that the build
// profiled is the one shipped. `--cpu-prof` cannot be used instead: NODE_OPTIONS refuses it, and it would profile
// start-up and warm-up too. The first SIGUSR2 starts V8's CPU profiler in the serving process; the second stops
// it and writes the profile to GOV_PROFILE_OUT. The launcher's first `node` (which only prints the heap flags,
// GOV_SIDECAR_V8_SIZED=query) loads this file too and does nothing.
'use strict';
const OUT = process.env.GOV_PROFILE_OUT;

if (OUT && process.env.GOV_SIDECAR_V8_SIZED !== 'query') install(OUT);

function install(out) {
  const inspector = require('node:inspector');
  const { renameSync, writeFileSync } = require('node:fs');
  const interval = Number(process.env.GOV_PROFILE_INTERVAL_US || 100);
  const session = new inspector.Session();
  session.connect();
  let running = false;
  process.on('SIGUSR2', () => {
    if (!running) {
      running = true;
      session.post('Profiler.enable', () => session.post('Profiler.setSamplingInterval', { interval }, () => session.post('Profiler.start')));
      return;
    }
    running = false;
    session.post('Profiler.stop', (err, result) => {
      // Written aside and renamed, so that the file appears whole.
      writeFileSync(`${out}.part`, err ? JSON.stringify({ error: err.message }) : JSON.stringify(result.profile));
      renameSync(`${out}.part`, out);
    });
  });
}
