import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { authenticate, authorize, AuthError, tokensEqual } from '../../src/controller/api/auth.js';
import { openApiPath } from '../../src/controller/api/openapi.js';
import { parseListenAddress } from '../../src/controller/api/server.js';
import { parseSince, SINCE_RULE } from '../../src/controller/api/since.js';
import { ADMIN_TOKEN_FILE } from '../../src/cli/local-state.js';

const store = {
  teamForToken: (t: string): string | undefined => (t === 'team-token-0123456789' ? 'vision' : undefined),
};

describe('auth', () => {
  it('tokensEqual is equality, whatever the lengths', () => {
    fc.assert(fc.property(fc.string(), fc.string(), (a, b) => tokensEqual(a, b) === (a === b)));
  });

  it('admin, team and refused callers', () => {
    expect(authenticate('Bearer admin-secret', 'admin-secret', store)).toEqual({ kind: 'admin' });
    expect(authenticate('bearer   team-token-0123456789 ', 'admin-secret', store)).toEqual({
      kind: 'team',
      team: 'vision',
    });
    const refused = (header: string | undefined): AuthError => {
      try {
        authenticate(header, 'admin-secret', store);
      } catch (e) {
        return e as AuthError;
      }
      throw new Error('accepted');
    };
    expect(refused(undefined).message).toMatch(/^missing bearer token/);
    expect(refused('Token admin-secret').message).toMatch(/^malformed Authorization header/);
    expect(refused('Bearer admin-secreT').message).toBe('invalid or revoked token');
    expect(refused('Bearer admin-secreT').statusCode).toBe(401);
    // An empty admin token (misconfiguration) never matches an empty bearer value.
    expect(() => authenticate('Bearer ', '', store)).toThrow(AuthError);
  });

  it('admin-only routes refuse team tokens with 403', () => {
    expect(() => authorize({ kind: 'team', team: 'a' }, 'admin')).toThrow(
      expect.objectContaining({ statusCode: 403 }),
    );
    expect(() => authorize({ kind: 'team', team: 'a' }, 'any')).not.toThrow();
    expect(() => authorize({ kind: 'admin' }, 'admin')).not.toThrow();
  });

  it('the 403 says how a client sends the admin token, and where the controller keeps it', () => {
    let refusal: unknown;
    try {
      authorize({ kind: 'team', team: 'a' }, 'admin');
    } catch (e) {
      refusal = e;
    }
    expect(refusal).toBeInstanceOf(AuthError);
    const message = (refusal as AuthError).message;
    // What the CLI reads: the controller's own FLEETWISE_ADMIN_TOKEN is no way of sending it.
    expect(message).toContain('send it with --token or FLEETWISE_TOKEN');
    expect(message).toContain(`the ${ADMIN_TOKEN_FILE} file of its state directory`);
  });
});

describe('parseListenAddress', () => {
  it('splits host:port, IPv6 in brackets, and port 0', () => {
    expect(parseListenAddress('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parseListenAddress('0.0.0.0:8080')).toEqual({ host: '0.0.0.0', port: 8080 });
    expect(parseListenAddress('[::1]:9000')).toEqual({ host: '::1', port: 9000 });
    expect(parseListenAddress('localhost:65535')).toEqual({ host: 'localhost', port: 65535 });
    for (const bad of ['8080', ':8080', 'host:65536', 'host:-1', '::1:80', 'host:80x'])
      expect(() => parseListenAddress(bad)).toThrow(/expected host:port/);
  });
});

describe('parseSince', () => {
  const now = 1_700_000_000;
  it('epoch seconds, ISO times and ages', () => {
    expect(parseSince('1699999000', now)).toBe(1_699_999_000);
    expect(parseSince('24h', now)).toBe(now - 86_400);
    expect(parseSince('90m', now)).toBe(now - 5_400);
    expect(parseSince('7d', now)).toBe(now - 604_800);
    expect(parseSince('2023-11-14T22:13:20Z', now)).toBe(1_700_000_000);
    for (const bad of ['yesterday', '24 hours', '-5', '', 'h']) expect(parseSince(bad, now)).toBeUndefined();
  });

  it('reads an ISO time without an offset as UTC, whatever the local zone (the CLI and the controller alike)', () => {
    const nov1 = Date.UTC(2026, 10, 1) / 1000;
    const zone = process.env.TZ;
    try {
      for (const tz of ['America/New_York', 'Asia/Kolkata', 'UTC']) {
        process.env.TZ = tz;
        expect(parseSince('2026-11-01T00:00:00', now), tz).toBe(nov1);
        expect(parseSince('2026-11-01 00:00', now), tz).toBe(nov1);
        expect(parseSince('2026-11-01T00:00:00.250', now), tz).toBe(nov1 + 0.25);
        expect(parseSince('2026-11-01', now), tz).toBe(nov1);
        // An offset, when given, is kept.
        expect(parseSince('2026-11-01T00:00:00Z', now), tz).toBe(nov1);
        expect(parseSince('2026-11-01T01:00:00+01:00', now), tz).toBe(nov1);
        expect(parseSince('2026-10-31T18:30:00-0530', now), tz).toBe(nov1);
      }
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
    // Not ISO 8601, or no such day: no point in time.
    for (const bad of [
      '2026-11-01T00:00:00 GMT',
      '2026-11-01x',
      '2026-02-30',
      '2026-13-01',
      '2026-11-01T25:00Z',
    ])
      expect(parseSince(bad, now), bad).toBeUndefined();
    expect(SINCE_RULE).toMatch(/UTC unless it names an offset/);
  });
});

describe('openApiPath', () => {
  it('turns fastify parameters into OpenAPI templates', () => {
    expect(openApiPath('/v1/jobs/:id/cancel')).toBe('/v1/jobs/{id}/cancel');
    expect(openApiPath('/healthz')).toBe('/healthz');
  });
});
