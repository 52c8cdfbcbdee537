import { describe, expect, it } from 'vitest';
import { FETCH_BAD_PORT_REASON, FETCH_BAD_PORTS } from '../../src/protocol/fetch-bad-ports.js';
import { UNREACHABLE_PORT, UNREACHABLE_URL } from './unreachable-url.js';

/** The address tests use for "no controller there" is one fetch tries and is refused at, not one it will not try. */
describe('the unreachable controller address', () => {
  it("is not one of fetch's bad ports, and a request to it is refused by the host", async () => {
    expect(FETCH_BAD_PORTS.has(UNREACHABLE_PORT)).toBe(false);
    const error = (await fetch(`${UNREACHABLE_URL}/healthz`).catch((e: unknown) => e)) as {
      cause?: { code?: string; message?: string };
    };
    expect(error.cause?.message).not.toBe(FETCH_BAD_PORT_REASON);
    expect(error.cause?.code).toBe('ECONNREFUSED');
  });
});
