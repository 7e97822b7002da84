/**
 * Secrets: provider key formats, private keys, connection strings, password and credential assignments.
 * Every pattern is linear-time (fixed prefixes, bounded repetition, one start position per candidate), and
 * what a pattern finds is then checked in code, so that the examples documentation is full of
 * (`sk-...`, `ghp_xxxx…`, `<your-key>`, `${API_KEY}`, `changeme`, `postgres://user:password@localhost`)
 * do not fire while real values do.
 */
import type { TextMatcher } from './detectors.js';
import { firstOf, isJwt, lower, mayHoldToken, memo, validated } from './validated-detectors.js';

/** Shannon entropy of `s` in bits per character. */
export function shannonEntropy(s: string): number {
  const counts = new Map<string, number>();
  for (const ch of s) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let h = 0;
  const n = s.length;
  for (const c of counts.values()) {
    const p = c / n;
    h -= p * Math.log2(p);
  }
  return h;
}

/**
 * Words and shapes that mark a value as a stand-in rather than a secret: "your…", "example", "changeme",
 * "replace me", "redacted", "xxxx", "****", "...", `<…>`, `${…}`, `{{…}}`, `%(…)s`, `$VAR`, and reads of
 * configuration (`process.env.X`, `os.environ[…]`, `os.getenv(…)`, `settings.X`).
 */
const PLACEHOLDER =
  /your|example|sample|placeholder|0123456789abcdef|change[_-]?me|replace|insert|redacted|dummy|xxxx|XXXX|\*\*\*|\.\.\.|<|>|\$\{|\{\{|%\(|process\.env|os\.environ|os\.getenv|getenv|environ|^env\.|^settings\.|^config\.|^secrets\./i;

export function isPlaceholder(value: string): boolean {
  if (PLACEHOLDER.test(value)) return true;
  if (/^\$(?:[A-Z_][A-Z0-9_]*|[a-z_][a-z0-9_]*)(?![\w$])/.test(value)) return true; // $VAR, $token (not $S8AdKQ…)
  if (/(.)\1{4}/.test(value)) return true; // aaaaa, 00000: filler, not a random key
  return false;
}

/**
 * A random-looking credential: at least 16 characters, letters and digits both present, no placeholder
 * mark, not an identifier or a call (`PARTNER_API_KEY`, `settings.key`, `getToken(`), and a Shannon entropy
 * of at least MIN_ENTROPY bits per character. Random keys sit far above it (hex ~3.7, base62/base64 ~4.5-5);
 * words and phrases sit below. Chosen on the corpus's train split (docs/policies.md, "Built-in detectors").
 */
export const MIN_ENTROPY = 3.0;
export const MIN_SECRET_LENGTH = 16;

export function looksLikeSecret(value: string): boolean {
  if (value.length < MIN_SECRET_LENGTH) return false;
  if (!/[A-Za-z]/.test(value) || !/\d/.test(value)) return false;
  if (isPlaceholder(value)) return false;
  if (/^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$/.test(value)) return false; // an environment variable's name
  if (isCode(value)) return false;
  if (value.includes('://')) return false;
  if (/^(?:sk|rk|pk)_test_|^pk_live_/.test(value)) return false; // Stripe test and publishable keys are not secret
  return shannonEntropy(value) >= MIN_ENTROPY;
}

/** `settings.PARTNER_API_KEY`, `process.env.TOKEN`, `getAccessToken(…`: a reference in code, not a value. */
function isCode(value: string): boolean {
  if (/^[A-Za-z_$][\w$.]*\(/.test(value)) return true;
  const parts = value.split('.');
  return parts.length > 1 && parts.every((p) => /^[A-Za-z_$][A-Za-z_$]*\d{0,2}$|^[A-Z][A-Z0-9_]*$/.test(p));
}

/**
 * The body of a prefixed token (after `sk-`, `ghp_`, `hf_`…): random characters, not a stand-in. Random
 * base62 bodies usually hold a digit, but not always (a Hugging Face token is often 34 letters): a body of
 * letters alone counts when it mixes cases and its entropy is that of a random string, not of a word.
 */
function tokenBody(body: string, minLength: number): boolean {
  if (body.length < minLength || isPlaceholder(body) || !/[A-Za-z]/.test(body)) return false;
  if (/\d/.test(body)) return true;
  return /[a-z]/.test(body) && /[A-Z]/.test(body) && shannonEntropy(body) >= 3.5;
}

/**
 * Labels that say a run of hex is a digest or an id, not a key: `md5 …`, `sha256: …`, `ETag: "…"`,
 * `checksum=…`, `commit …`. The hex-only provider formats (Twilio `SK…`, Mailgun `key-…`, Mailchimp
 * `…-us21`, Shopify, DigitalOcean) stand down after one.
 */
const HASH_LABEL = /(?:^|[^a-z])(?:md5|sha-?(?:1|224|256|384|512)?|checksum|digest|hash|etag|commit|fingerprint|crc32|uuid|guid|trace[ _-]?id|request[ _-]?id)["']?\s{0,3}(?:sum)?\s{0,3}[:=#]?\s{0,3}["']?$/;

// --- Provider tokens by prefix, alphabet and length -------------------------------------------------------

interface Format {
  re: RegExp;
  /** Literals one of which every match contains (or a pattern it matches): a text without them skips the pattern. */
  hints: readonly string[] | RegExp;
  /** Characters of the match that are the prefix, not the random body. */
  prefix: number;
  minBody: number;
  /** A format whose random part may hold `+` or `/` (base64), so it has no long run of token characters. */
  base64?: boolean;
  /** A format whose random part may be letters only (no digit), so mayHoldToken() cannot pre-screen it. */
  letters?: boolean;
  /** A body of hex digits only: a digest labelled as one (HASH_LABEL) is not this token. */
  hex?: boolean;
}

const f = (hints: readonly string[] | RegExp, re: RegExp, prefix: number, minBody = 16): Format => ({ hints, re, prefix, minBody });

/**
 * Fixed-format provider credentials. The prefix makes a match a token, not prose; the body check keeps
 * `xoxb-your-bot-token` and `key-xxxxxxxx…` out.
 */
const PROVIDER_FORMATS: readonly Format[] = [
  f(['xox'], /(?<![\w-])xox[abposr]-[A-Za-z0-9-]{10,250}/, 5), // Slack
  f(['hooks.slack.com'], /https:\/\/hooks\.slack\.com\/services\/T[A-Z0-9]{6,12}\/B[A-Z0-9]{6,12}\/[A-Za-z0-9]{20,32}/, 33, 20), // Slack webhook
  f(['/api/webhooks/'], /https:\/\/(?:ptb\.|canary\.)?discord(?:app)?\.com\/api\/webhooks\/\d{15,20}\/[\w-]{60,80}/, 0, 40), // Discord webhook
  f(['_live_'], /(?<![\w-])(?:sk|rk)_live_[A-Za-z0-9]{20,99}/, 8), // Stripe live
  f(['AIza'], /(?<![\w-])AIza[0-9A-Za-z_-]{35}(?![\w-])/, 4), // Google API key
  f(['GOCSPX-'], /(?<![\w-])GOCSPX-[A-Za-z0-9_-]{28}(?![\w-])/, 7), // Google OAuth client secret
  f(['ya29.'], /(?<![\w-])ya29\.[A-Za-z0-9_-]{30,300}/, 5), // Google OAuth access token
  f(['glpat-'], /(?<![\w-])glpat-[A-Za-z0-9_-]{20}(?![\w-])/, 6), // GitLab
  f(['npm_'], /(?<![\w-])npm_[A-Za-z0-9]{36}(?![\w-])/, 4), // npm
  f(['pypi-'], /(?<![\w-])pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}/, 5), // PyPI
  f(['SG.'], /(?<![\w-])SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![\w-])/, 3), // SendGrid
  { ...f(['SK'], /(?<![\w./:-])SK[0-9a-f]{32}(?![\w-])/, 2), hex: true }, // Twilio API key
  { ...f(['hf_'], /(?<![\w-])hf_[A-Za-z0-9]{34,40}(?![\w-])/, 3), letters: true }, // Hugging Face
  { ...f(['shp'], /(?<![\w-])shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}(?![\w-])/, 6), hex: true }, // Shopify
  { ...f(['dop_v1_'], /(?<![\w-])dop_v1_[a-f0-9]{64}(?![\w-])/, 7), hex: true }, // DigitalOcean
  f(['ATATT3'], /(?<![\w-])ATATT3[A-Za-z0-9_=-]{60,200}/, 6), // Atlassian
  f(['github_pat_'], /(?<![\w-])github_pat_[A-Za-z0-9_]{82}(?![\w-])/, 11), // GitHub fine-grained
  f(/\.[\w-]{6}\./, /(?<![\w-])[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}(?![\w-])/, 0, 40), // Discord bot token
  f([':AA'], /(?<![\w:-])(?:bot)?\d{8,10}:AA[A-Za-z0-9_-]{33}(?![\w-])/, 0, 20), // Telegram bot token
  f(['sq0atp-', 'sq0csp-', 'EAAA'], /(?<![\w-])(?:sq0atp-[A-Za-z0-9_-]{22}|sq0csp-[A-Za-z0-9_-]{43}|EAAA[A-Za-z0-9_-]{60})(?![\w-])/, 4), // Square
  { ...f(['key-'], /(?<![\w-])key-[0-9a-f]{32}(?![\w-])/, 4), hex: true }, // Mailgun
  { ...f(['-us'], /(?<![\w./:-])[0-9a-f]{32}-us\d{1,2}(?![\w-])/, 0), hex: true }, // Mailchimp
  { ...f(['AccountKey='], /AccountKey=[A-Za-z0-9+/]{86}==/, 11, 40), base64: true }, // Azure storage account key
  f(['lin_api_', 'ntn_', 'PMAK-', 'hvs.', 'dp.pt.', 'gsk_', 'r8_', 'pplx-', 'xai-'], /(?<![\w-])(?:lin_api_[A-Za-z0-9]{40}|ntn_[A-Za-z0-9]{40,50}|PMAK-[a-f0-9]{24}-[a-f0-9]{34}|hvs\.[A-Za-z0-9_-]{24,100}|dp\.pt\.[A-Za-z0-9]{43}|gsk_[A-Za-z0-9]{52}|r8_[A-Za-z0-9]{37}|pplx-[A-Za-z0-9]{48}|xai-[A-Za-z0-9]{70,90})(?![\w-])/, 0, 20), // Linear, Notion, Postman, Vault, Doppler, Groq, Replicate, Perplexity, xAI
];

function formatsMatcher(label: string, formats: readonly Format[]): TextMatcher {
  const compiled = formats.map((x) => ({ ...x, re: new RegExp(x.re.source, `${x.re.flags.replace(/[gy]/g, '')}g`) }));
  return {
    label,
    find(text) {
      let best = -1;
      const run = mayHoldToken(text);
      for (const x of compiled) {
        if (!run && x.base64 !== true && x.letters !== true) continue;
        if (x.hints instanceof RegExp ? !x.hints.test(text) : !x.hints.some((h) => text.includes(h))) continue;
        let n = 0;
        for (const m of text.matchAll(x.re)) {
          if (best !== -1 && m.index >= best) break;
          if (tokenBody(m[0].slice(x.prefix), x.minBody) && !(x.hex === true && HASH_LABEL.test(text.slice(Math.max(0, m.index - 24), m.index).toLowerCase()))) {
            best = m.index;
            break;
          }
          if (++n >= 100) break;
        }
      }
      return best;
    },
  };
}

// --- Credentials in context --------------------------------------------------------------------------------

/**
 * A credential name followed by `:`/`=` and a value: `api_key=…`, `"clientSecret": "…"`, `X-API-Key: …`,
 * `AWS_SECRET_ACCESS_KEY=…`, `TWILIO_AUTH_TOKEN=…`, `DD_API_KEY=…`, "Your API key: …". The pattern is
 * anchored on the credential word (the name's last part); the rest of the name is read backwards in code.
 */
const CREDENTIAL_ASSIGNMENT =
  /(?:api[ _.-]?key|apikey|(?:app|encryption|signing|master|secret(?:[ _-]?access)?)[ _-]?key|secret|token)["']?[ \t]{0,4}(?::=|=>|[:=])[ \t]{0,4}["']?([^\s"'`,;<>{}[\]\\|]{1,512})/gi;

/** Qualifiers that make a "token" something other than a credential: pagination, tracing, counts. */
const NOT_CREDENTIAL = /(?:^|[^a-z])(?:page|next|prev|previous|continuation|sync|pagination|cursor|request|trace|idempotency|max|num|count|total|csrf|xsrf|nonce|public|publishable|site|sitekey|recaptcha)[ _.-]?$/;
const NOT_CREDENTIAL_CAMEL = /[a-z0-9](?:Page|Next|Prev|Continuation|Sync|Cursor|Request|Trace|Idempotency|Max|Csrf|Xsrf|Public|Publishable|Site)$/;

function credentialAt(m: RegExpMatchArray, text: string): boolean {
  const value = m[1].replace(/[.)]+$/, '');
  if (!looksLikeSecret(value)) return false;
  if (namedByFormat(value)) return false;
  // The name's qualifier, read backwards: `next_page_token`, `max_tokens`, `publishable_key` are not secrets.
  const prefix = text.slice(Math.max(0, m.index! - 32), m.index!);
  // (The credential word must end the name: the pattern requires the separator right after it, so
  // `token_type=…`, `tokens: 1532` or `secret_santa=…` never reach this check.)
  return !NOT_CREDENTIAL.test(prefix.toLowerCase()) && !NOT_CREDENTIAL_CAMEL.test(prefix);
}

/** `Authorization: Bearer <token>` (and the Basic, Token, Bot, ApiKey, Digest schemes), in a header or a config. */
const AUTHORIZATION = /\bauthorization["']?[ \t]{0,4}[:=][ \t]{0,4}["']?(?:bearer|basic|token|bot|apikey|digest)[ \t]{1,4}([^\s"'`,;<>{}\\]{8,4096})/gi;

function authorizationAt(m: RegExpMatchArray): boolean {
  const value = m[1];
  if (namedByFormat(value)) return false;
  return looksLikeSecret(value) || (value.startsWith('eyJ') && value.length >= 20 && !isPlaceholder(value));
}

const credentialHint = (t: string) => {
  const l = lower(t);
  return l.includes('key') || l.includes('secret') || l.includes('token');
};

// --- Passwords ---------------------------------------------------------------------------------------------

/**
 * `password: x`, `DB_PASSWORD=x`, `"pwd": "x"`, `Password=x;` in an ADO.NET string, and the same words in
 * the languages support traffic arrives in (Passwort, Kennwort, contraseña, mot de passe, senha). The
 * value must not be a stand-in (`${DB_PASSWORD}`, `<your password>`, `********`, `changeme`,
 * `process.env.X`) nor the start of a sentence ("Password: must be at least 12 characters").
 */
const PASSWORD_ASSIGNMENT =
  /(?<![a-z0-9])(?:password|passwort|kennwort|passwd|pwd|pass|passphrase|contraseña|contrasena|mot de passe|senha|parola d'ordine|wachtwoord)["']?[ \t]{0,4}(?::=|=>|[:=])[ \t]{0,4}["']?([^\s"',;]{1,256})([ \t]{1,4}[a-z]{2,})?/gi;

/**
 * The same for the words written outside Latin-1 (Polish, Russian, Japanese, Chinese), with the full-width
 * colon too. Kept apart and case-sensitive (`[Пп]`, `[Hh]`): in V8 a case-insensitive pattern holding
 * non-ASCII alternatives scans markedly slower, and every text would pay for it.
 */
const PASSWORD_ASSIGNMENT_INTL =
  /(?:[Hh]asło|[Пп]ароль|ПАРОЛЬ|パスワード|密码|密碼)["']?[ \t]{0,4}(?::=|=>|[:=：])[ \t]{0,4}["'「“]?([^\s"',;」”。、，]{1,256})([ \t]{1,4}[a-z]{2,})?/g;

/**
 * "Your temporary password is Xk9#…", "Su contraseña es …", "Das Passwort ist …": the sentence form, which
 * reads like prose, so its value must look like a password (a letter and a digit or symbol, 6+ characters).
 */
const PASSWORD_SENTENCE =
  /(?<![a-z0-9])(?:password|passwort|kennwort|passphrase|contraseña|contrasena|mot de passe|senha|wachtwoord)[ \t]{1,4}(?:is|es|est|c'est|c’est|ist|é|è|era|was|jest|to)[ \t]{1,4}["'“]?([^\s"',;”]{6,256})/gi;

/**
 * Russian, Japanese and Chinese write the password straight after the word: "пароль Xk9#…", "パスワードは
 * Xk9#…", "密码是Xk9#…". With no separator the value must look like a password (passwordSentenceAt), which
 * keeps "пароль должен содержать 12 символов" and "パスワードは12文字以上" out (no Latin letter and digit).
 */
const PASSWORD_BARE =
  /(?:[Hh]asło[ \t]{1,4}(?:jest|to)[ \t]{1,4}|(?:[Пп]ароль|ПАРОЛЬ|パスワード|密码|密碼)(?:[ \t]{0,4}(?:は|是|为|為|это|—|-)[ \t]{0,4}|[ \t]{1,4}))["'「“]?([^\s"',;」”。、，]{6,256})/g;

function passwordSentenceAt(m: RegExpMatchArray): boolean {
  const value = m[1].replace(/[.)!—。]+$/, '');
  if (value.length < 6 || !/[A-Za-z]/.test(value) || !/[\d!@#$%^&*_+=?~-]/.test(value)) return false;
  return !isPlaceholder(value) && !isCode(value) && !PASSWORD_STAND_IN.test(value);
}

/**
 * A password given on a command line (`docker login --password X`, `--passwd=X`) or as a configuration
 * key/value pair (`<add key="DbPassword" value="X" />`, `name="smtp_password" value="X"`).
 */
const PASSWORD_FLAG = /(?<![\w-])--(?:password|passwd|pass)(?:=|[ \t]{1,4})["']?([^\s"'`;|&<>]{1,256})/gi;
const PASSWORD_KEY_VALUE = /\b(?:key|name)=["'][\w.:-]{0,40}?(?:password|passwd|pwd)["'][ \t]{1,4}value=["']([^"'\s]{1,256})["']/gi;

function passwordValueAt(m: RegExpMatchArray): boolean {
  const value = m[1];
  if (value.length < 4 || value.startsWith('-')) return false;
  if (PASSWORD_STAND_IN.test(value) || isPlaceholder(value) || isCode(value)) return false;
  return !/^[*<[%{]/.test(value) && !/^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$/.test(value);
}

const PASSWORD_STAND_IN = /^(?:password|passwort|pass|passwd|pwd|secret|changeme|change_me|change-me|none|null|nil|undefined|true|false|required|optional|hidden|masked|empty|n\/a|tbd|todo|\*+|x+|\.+|-+|\?+)$/i;

function passwordAt(m: RegExpMatchArray): boolean {
  const value = m[1].replace(/[.)]+$/, '');
  if (value.length < 4) return false;
  if (PASSWORD_STAND_IN.test(value) || isPlaceholder(value)) return false;
  if (/^[*<[]/.test(value)) return false;
  if (/^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$/.test(value)) return false; // the name of a variable holding it
  if (isCode(value)) return false;
  // "密码：至少12个字符", "пароль: обязателен": a value in kana, CJK or Cyrillic words is a sentence, not a password.
  if (/[\u3040-\u9fff\uff01-\uff60]/.test(value) || /^[\u0400-\u04ff]+$/.test(value)) return false;
  // Prose: "Password: reset it from…", "Password: must be at least…": a lower-case word followed by more words.
  if (m[2] !== undefined && /^[a-z]+$/.test(value)) return false;
  return true;
}

/** A hint asked by several members of one detector (firstOf) for the same text: answered once per text. */
function oncePerText(hint: (t: string) => boolean): (t: string) => boolean {
  let lastText: string | undefined;
  let last = false;
  return (t) => {
    if (t !== lastText) {
      last = hint(t);
      lastText = t;
    }
    return last;
  };
}

const passwordHint = oncePerText((t: string) => {
  const l = lower(t);
  return (
    l.includes('pass') || l.includes('pwd') || l.includes('kennwort') || l.includes('contrase') || l.includes('senha') || l.includes('parola') ||
    l.includes('wachtwoord') // (each includes() scans the text: ~2 µs on 2 KB, so the list stays short; hasło is intlPasswordHint's)
  );
});

/** The words outside Latin-1, looked for in the text as written (no lower-casing needed: the patterns list both cases). */
// includes() rather than one pattern: a needle outside Latin-1 cannot occur in a one-byte (Latin-1) string,
// which V8 answers without scanning, so ASCII texts pay nothing here; an alternation would scan them.
const intlPasswordHint = oncePerText(
  (t: string) => t.includes('asło') || t.includes('ароль') || t.includes('АРОЛЬ') || t.includes('パスワード') || t.includes('密码') || t.includes('密碼'),
);

// --- Connection strings ------------------------------------------------------------------------------------

/**
 * `scheme://user:password@host` (postgres, mysql, mongodb(+srv), redis with an empty user, amqp(s), mssql…),
 * the password not a stand-in (`password`, `changeme`, `<password>`, `${DB_PASSWORD}`, `****`).
 */
const CONNECTION = /\b[a-z][a-z0-9+.-]{1,20}:\/\/([^\s:@/]{0,100}):([^\s@/]{1,200})@[A-Za-z0-9.-]{1,253}/gi;

function connectionAt(m: RegExpMatchArray): boolean {
  const password = m[2];
  if (PASSWORD_STAND_IN.test(password) || isPlaceholder(password)) return false;
  if (/^[*<%{]/.test(password)) return false;
  return password.length >= 3;
}

// --- Private keys ------------------------------------------------------------------------------------------

/**
 * A PEM or OpenSSH private key: the BEGIN line followed by key material (at least 16 base64 characters,
 * after optional `Proc-Type`/`DEK-Info` headers; a JSON-escaped `\n` counts as a line break). A header on its
 * own ("the file must begin with -----BEGIN OPENSSH PRIVATE KEY-----") or with `...` is documentation.
 * PuTTY key files (`PuTTY-User-Key-File-N:` with `Private-Lines:`) fire too.
 */
const PEM = /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----((?:\s|\\[rn]){1,8}(?:(?:Proc-Type|DEK-Info|Comment):[^\n\\]{0,200}(?:\s|\\[rn]){1,8}){0,3})([A-Za-z0-9+/=]{16})/g;
const PUTTY = /PuTTY-User-Key-File-\d: [\w-]{3,30}/g;
const PUTTY_PRIVATE = /Private-Lines: \d{1,3}\s{1,4}[A-Za-z0-9+/=]{16}/;
const puttyAt = (m: RegExpMatchArray, text: string) => PUTTY_PRIVATE.test(text.slice(m.index!, m.index! + 4000));

// --- The sk- family ----------------------------------------------------------------------------------------

/** OpenAI (`sk-…`, `sk-proj-…`, `sk-svcacct-…`, `sk-admin-…`) and Anthropic (`sk-ant-api03-…`, `sk-ant-admin01-…`) keys. */
const SK = /(?<![\w-])sk-(?:(?:proj|svcacct|admin|None)-|ant-(?:api|admin|sid)\d\d-)?([A-Za-z0-9_-]{20,400})/g;

const AWS_ACCESS_KEY = validated('AWS access key', /(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?![A-Z0-9])/, (m) => !/(.)\1{4}/.test(m[0]), (t) => /A(?:KI|SI|BI|CC)A/.test(t));
const SK_API_KEY = validated('sk- API key', SK, (m) => tokenBody(m[1], 20), (t) => mayHoldToken(t) && t.includes('sk-'));
const GITHUB_TOKEN = validated('GitHub token', /(?<![\w])gh[pousr]_([A-Za-z0-9]{36,255})/, (m) => tokenBody(m[1], 36), (t) => mayHoldToken(t) && t.includes('gh'));
const PROVIDER_TOKEN = formatsMatcher('provider API token', PROVIDER_FORMATS);
const JWT_VALUE = /^eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*$/;

/**
 * Whether an assigned value is itself a token a specific detector names (aws_access_key, sk_api_key,
 * github_token, provider_token, jwt): `api_key="sk-proj-…"`, `_authToken=npm_…`, `"access_token": "eyJ…"`.
 * secret_assignment then stands down, so one secret is reported once, by its most specific detector.
 * (The unmemoised matchers are used, so this does not disturb the per-text caches of the named detectors.)
 */
function namedByFormat(value: string): boolean {
  if (JWT_VALUE.test(value) && isJwt(value)) return true;
  return AWS_ACCESS_KEY.find(value) !== -1 || SK_API_KEY.find(value) !== -1 || GITHUB_TOKEN.find(value) !== -1 || PROVIDER_TOKEN.find(value) !== -1;
}

export const SECRET_DETECTORS: ReadonlyArray<[string, TextMatcher]> = ([
  ['aws_access_key', AWS_ACCESS_KEY],
  ['sk_api_key', SK_API_KEY],
  ['github_token', GITHUB_TOKEN],
  ['private_key', firstOf('private key', [validated('PEM private key', PEM, () => true, (t) => t.includes('PRIVATE KEY')), validated('PuTTY private key', PUTTY, puttyAt, (t) => t.includes('PuTTY-User-Key'))])],
  ['provider_token', PROVIDER_TOKEN],
  ['connection_string', validated('connection string with a password', CONNECTION, connectionAt, (t) => t.includes('://'))],
  [
    'password_assignment',
    firstOf('password assignment', [
      validated('password assignment', PASSWORD_ASSIGNMENT, passwordAt, passwordHint),
      validated('password sentence', PASSWORD_SENTENCE, passwordSentenceAt, passwordHint),
      validated('password assignment (non-Latin words)', PASSWORD_ASSIGNMENT_INTL, passwordAt, intlPasswordHint),
      validated('password without separator', PASSWORD_BARE, passwordSentenceAt, intlPasswordHint),
      validated('password flag', PASSWORD_FLAG, passwordValueAt, (t) => t.includes('--pass')),
      validated('password key/value', PASSWORD_KEY_VALUE, passwordValueAt, (t) => t.includes('value=')),
    ]),
  ],
  [
    'secret_assignment',
    firstOf('credential with a high-entropy value', [
      validated('credential assignment', CREDENTIAL_ASSIGNMENT, credentialAt, credentialHint),
      validated('authorization header', AUTHORIZATION, authorizationAt, (t) => lower(t).includes('authorization')),
    ]),
  ],
] as Array<[string, TextMatcher]>).map(([name, m]) => [name, memo(m)]);
