import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { decodeJwt, jwtVerify, UnsecuredJWT, type JWTVerifyOptions } from 'jose';
import type { Tier } from '../contracts/common.js';
import { Tier as TierSchema } from '../contracts/common.js';

export interface Principal {
  tier: Tier;
  subject: string;
  /** A JWT's `sources` claim: the source chains it may write through POST /v1/audit/ingest. */
  sources?: readonly string[];
}

/** Resolves the caller from the request headers; null means 401. Each mode reads exactly one header. */
export interface Authenticator {
  readonly header: string;
  authenticate(headers: Record<string, string | string[] | undefined>): Promise<Principal | null>;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** Equal-length digests make timingSafeEqual applicable to tokens of any length. */
function sameSecret(givenDigest: Buffer, expectedDigest: Buffer): boolean {
  return timingSafeEqual(givenDigest, expectedDigest);
}

function single(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? undefined : v;
}

function tierClaim(token: string): Tier | null {
  try {
    const t = TierSchema.safeParse(decodeJwt(token).tier);
    return t.success ? t.data : null;
  } catch {
    return null;
  }
}

/** The embedded gateway's token when GOV_EMBED_TOKEN is unset: an unsigned JWT carrying tier team (spec). */
export function generateEmbedToken(): string {
  return new UnsecuredJWT({ tier: 'team' }).setSubject(`embedded-${randomUUID()}`).setIssuedAt().encode();
}

/**
 * Embedded mode: `Authorization: Bearer <token>` only. The token is matched exactly (constant time);
 * if it is a JWT its tier claim names the tier, otherwise the tier is team.
 */
export function bearerAuthenticator(token: string): Authenticator {
  const expected = digest(token);
  const principal: Principal = { tier: tierClaim(token) ?? 'team', subject: subjectOf(token) };
  return {
    header: 'authorization',
    async authenticate(headers) {
      const h = single(headers.authorization);
      if (h === undefined || h.length < 8 || h.slice(0, 7).toLowerCase() !== 'bearer ') return null;
      return sameSecret(digest(h.slice(7).trim()), expected) ? principal : null;
    },
  };
}

function subjectOf(token: string): string {
  try {
    const sub = decodeJwt(token).sub;
    if (typeof sub === 'string' && sub.length > 0) return sub;
  } catch {
    /* not a JWT */
  }
  return 'embedded';
}

/** Claims a gateway JWT must carry besides `exp` (GOV_JWT_AUDIENCE, GOV_JWT_ISSUER); null: not checked. */
export interface JwtClaimChecks {
  audience: string | null;
  issuer: string | null;
}

/**
 * Full gateway: `X-Gov-Token` only (never Authorization). It carries an API key from GOV_API_KEYS or an
 * HS256 JWT signed with GOV_JWT_SECRET; jose rejects alg none, other algorithms, bad signatures and expiry.
 * A JWT must carry `exp`: a leaked token without one would be valid for ever. `aud` and `iss` are checked
 * when the deployment names them, so a token minted for another service with the same secret is refused.
 */
export function govTokenAuthenticator(apiKeys: Array<{ key: string; tier: Tier }>, jwtSecret: string | null, claims: JwtClaimChecks = { audience: null, issuer: null }): Authenticator {
  const keys = apiKeys.map((k, i) => ({ digest: digest(k.key), tier: k.tier, subject: `api-key-${i + 1}` }));
  const secret = jwtSecret === null ? null : new TextEncoder().encode(jwtSecret);
  const verifyOptions: JWTVerifyOptions = { algorithms: ['HS256'], requiredClaims: ['exp'] };
  if (claims.audience !== null) verifyOptions.audience = claims.audience;
  if (claims.issuer !== null) verifyOptions.issuer = claims.issuer;
  return {
    header: 'x-gov-token',
    async authenticate(headers) {
      const token = single(headers['x-gov-token'])?.trim();
      if (!token || token.length > 8192) return null;
      const d = digest(token);
      let match: Principal | null = null;
      // No early exit: every configured key is compared, so timing says nothing about which one matched.
      for (const k of keys) if (sameSecret(d, k.digest) && match === null) match = { tier: k.tier, subject: k.subject };
      if (match) return match;
      if (secret === null || token.split('.').length !== 3) return null;
      try {
        const { payload } = await jwtVerify(token, secret, verifyOptions);
        const tier = TierSchema.safeParse(payload.tier);
        if (!tier.success) return null;
        const principal: Principal = { tier: tier.data, subject: typeof payload.sub === 'string' ? payload.sub : 'jwt' };
        const sources = sourcesClaim(payload.sources);
        if (sources === undefined) return null;
        if (sources !== null) principal.sources = sources;
        return principal;
      } catch {
        return null;
      }
    },
  };
}

/** A `sources` claim: a glob or a list of them; null when absent; undefined when malformed (the token is refused). */
function sourcesClaim(v: unknown): readonly string[] | null | undefined {
  if (v === undefined) return null;
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list) || list.length === 0 || list.length > 64 || !list.every((g) => typeof g === 'string' && g.length > 0 && g.length <= 200)) return undefined;
  return list as string[];
}

/** AUTH_ENABLED=false (development only): every caller is an anonymous enterprise principal. */
export function openAuthenticator(): Authenticator {
  const principal: Principal = { tier: 'enterprise', subject: 'anonymous' };
  return { header: 'none', authenticate: async () => principal };
}
