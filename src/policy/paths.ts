import { fileURLToPath } from 'node:url';

// Resolved against this module, which sits two levels below the package root both as src/policy/*.ts and
// as dist/policy/*.js, so the shipped files are found whatever the working directory is.
export const BUNDLED_POLICY_DIR = fileURLToPath(new URL('../../policies/', import.meta.url));
export const BUNDLED_MANIFEST_DIR = fileURLToPath(new URL('../../manifests/agents/', import.meta.url));
/** The manifest root: golden rules are read from its golden/ directory (and a legacy golden.yaml). */
export const BUNDLED_MANIFEST_ROOT = fileURLToPath(new URL('../../manifests/', import.meta.url));
