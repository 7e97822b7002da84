/**
 * Built-in detectors for secrets, personal data and prompt injection. Every pattern is compiled once when
 * this module loads and is written so that V8's backtracking engine stays linear in the text length:
 * no nested quantifiers, bounded repetition where two parts could overlap, and look-behinds that allow only
 * one start position per run of candidate characters. Literal hints let most texts skip a regex entirely.
 */

import { findInjection } from './injection/detector.js';
import { VALIDATED_DETECTORS } from './validated-detectors.js';

export interface TextMatcher {
  /** Human-readable name used in failure messages; never the matched text, which may be a secret. */
  readonly label: string;
  /** Index of the first match, or -1. */
  find(text: string): number;
}

function matcher(label: string, regexes: readonly RegExp[], hints?: readonly string[]): TextMatcher {
  for (const re of regexes) {
    // A global or sticky regex keeps lastIndex between calls, which would make matching stateful.
    if (re.global || re.sticky) throw new Error(`detector ${label}: stateful regex flags are not allowed`);
  }
  if (hints && hints.length > 0) {
    return {
      label,
      find(text) {
        let hinted = false;
        for (const h of hints) if (text.includes(h)) { hinted = true; break; }
        if (!hinted) return -1;
        return firstIndex(regexes, text);
      },
    };
  }
  return { label, find: (text) => firstIndex(regexes, text) };
}

function firstIndex(regexes: readonly RegExp[], text: string): number {
  for (const re of regexes) {
    const i = text.search(re);
    if (i !== -1) return i;
  }
  return -1;
}

// Prompt injection is a layered detector of its own (src/policy/injection, docs/injection-detection.md):
// normalisation, decoding of encoded payloads, rule families in nine languages and a small statistical
// model. Its label names the detector, never the matched text.
const INJECTION: TextMatcher = { label: 'prompt-injection phrasing', find: findInjection };

export const DETECTORS: ReadonlyMap<string, TextMatcher> = new Map<string, TextMatcher>([
  ['aws_access_key', matcher('AWS access key', [/(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])/], ['AKIA', 'ASIA'])],
  ['sk_api_key', matcher('sk- API key', [/(?<![\w-])sk-[A-Za-z0-9_-]{20,}/], ['sk-'])],
  ['github_token', matcher('GitHub token', [/(?<![\w])gh[pousr]_[A-Za-z0-9]{36,}/], ['gh'])],
  ['private_key', matcher('PEM private key', [/-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----/], ['PRIVATE KEY'])],
  // Provider token formats with a fixed prefix and a fixed alphabet and length, so a match is a token, not
  // prose: Slack, Stripe live keys, Google API keys, GitLab, npm, PyPI, SendGrid, Twilio, Hugging Face,
  // Shopify, DigitalOcean, Atlassian, fine-grained GitHub tokens. (AWS, sk- and classic GitHub tokens have
  // detectors of their own.)
  [
    'provider_token',
    matcher(
      'provider API token',
      [
        /(?<![\w-])xox[abposr]-[A-Za-z0-9-]{10,250}/,
        /(?<![\w-])(?:sk|rk)_live_[A-Za-z0-9]{20,99}/,
        /(?<![\w-])AIza[0-9A-Za-z_-]{35}(?![\w-])/,
        /(?<![\w-])glpat-[A-Za-z0-9_-]{20}(?![\w-])/,
        /(?<![\w-])npm_[A-Za-z0-9]{36}(?![\w-])/,
        /(?<![\w-])pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}/,
        /(?<![\w-])SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![\w-])/,
        /(?<![\w-])SK[0-9a-f]{32}(?![\w-])/,
        /(?<![\w-])hf_[A-Za-z0-9]{34,40}(?![\w-])/,
        /(?<![\w-])shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}(?![\w-])/,
        /(?<![\w-])dop_v1_[a-f0-9]{64}(?![\w-])/,
        /(?<![\w-])ATATT3[A-Za-z0-9_=-]{60,200}/,
        /(?<![\w-])github_pat_[A-Za-z0-9_]{82}(?![\w-])/,
      ],
      ['xox', '_live_', 'AIza', 'glpat-', 'npm_', 'pypi-', 'SG.', 'SK', 'hf_', 'shp', 'dop_v1_', 'ATATT3', 'github_pat_'],
    ),
  ],
  // A URL or DSN carrying a password: scheme://user:password@host (postgres, mysql, mongodb, redis, amqp...).
  [
    'connection_string',
    matcher('connection string with a password', [/\b[a-z][a-z0-9+.-]{1,20}:\/\/[^\s:@\/]{1,100}:[^\s@\/*<]{1,200}@[A-Za-z0-9.-]{1,253}/i], ['://']),
  ],
  [
    'password_assignment',
    // The value's first character excludes masks and placeholders ("********", "<redacted>").
    matcher('password assignment', [/\b(?:password|passwd|pwd|passphrase)["']?\s*[:=]\s*["']?[^\s"',;*<[][^\s"',;]*/i]),
  ],
  ['us_ssn', matcher('US social security number', [/(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])/], ['-'])],
  [
    'email',
    matcher('e-mail address', [/(?<![\w.%+-])[\w.%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}(?![\w-])/], ['@']),
  ],
  ['prompt_injection', INJECTION],
  ...VALIDATED_DETECTORS,
]);

export function detectorNames(): string[] {
  return [...DETECTORS.keys()];
}

/**
 * A group holding a quantifier that is itself quantified, e.g. `(a+)+` or `(\w*x){2,}`: the classic shape of
 * catastrophic backtracking. A heuristic, not a proof, but it rejects the patterns people actually write.
 */
const NESTED_QUANTIFIER = /\((?:[^()\\]|\\.)*?(?:[+*]|\{\d+,\d*\})(?:[^()\\]|\\.)*\)(?:[+*]|\{\d+,)/;

/** Compiles a pack-supplied pattern, or throws a message naming what is wrong with it. */
export function compileUserPattern(label: string, pattern: string, flags = ''): TextMatcher {
  if (!/^[imsu]*$/.test(flags)) throw new Error(`flags may only contain i, m, s, u (got "${flags}")`);
  if (NESTED_QUANTIFIER.test(pattern)) {
    throw new Error(`pattern has a quantified group containing a quantifier, which can backtrack catastrophically: ${pattern}`);
  }
  let re: RegExp;
  try {
    re = new RegExp(pattern, flags);
  } catch (e) {
    throw new Error(`invalid regular expression: ${(e as Error).message}`);
  }
  return matcher(label, [re]);
}
