#!/usr/bin/env node
console.log("gov cli ok", process.argv.slice(2));
