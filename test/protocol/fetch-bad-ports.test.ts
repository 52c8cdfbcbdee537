import { describe, expect, it } from 'vitest';
import {
  FETCH_BAD_PORT_REASON,
  FETCH_BAD_PORTS,
  badPortOfUrl,
  badPortProblem,
} from '../../src/protocol/fetch-bad-ports.js';

/**
 * fleetwise's copy of fetch's bad ports is the list the running Node's fetch refuses: read from the source of the
 * undici Node bundles (Node exports no copy), and each refused by fetch itself, which decides before it connects.
 */

/** The bad ports in the source of Node's bundled undici (its `badPorts` array, port numbers as strings). */
function bundledUndiciBadPorts(): number[] {
  const natives = (process as unknown as { binding(name: 'natives'): Record<string, string> }).binding(
    'natives',
  );
  const source = natives['internal/deps/undici/undici'];
  if (source === undefined) throw new Error('this Node has no bundled undici among its natives');
  const list = /\bbadPorts\s*=\s*\(?\s*(?:\/\*\*[^*]*\*\/\s*)?(\[[^\]]*\])/.exec(source)?.[1];
  if (list === undefined) throw new Error("no badPorts list in Node's bundled undici");
  return (JSON.parse(list) as string[]).map(Number);
}

describe("fetch's bad ports", () => {
  it("are the ones Node's bundled undici lists", () => {
    expect([...FETCH_BAD_PORTS].sort((a, b) => a - b)).toEqual(bundledUndiciBadPorts().sort((a, b) => a - b));
  });

  it('are each refused by fetch with its bad-port reason', async () => {
    for (const port of FETCH_BAD_PORTS) {
      const error = await fetch(`http://127.0.0.1:${port}/`).then(
        () => undefined,
        (e: unknown) => e as { cause?: { message?: string } },
      );
      expect(error?.cause?.message, `port ${port}`).toBe(FETCH_BAD_PORT_REASON);
    }
  });

  it('are found in a URL that names one, and in no other', () => {
    expect(badPortOfUrl('http://127.0.0.1:6000')).toBe(6000);
    expect(badPortOfUrl('https://[::1]:10080/api')).toBe(10080);
    expect(badPortOfUrl('http://box-a:7070')).toBeUndefined();
    // 80 and 443 go unwritten; other schemes' default ports (ftp's 21) do not apply to http(s).
    expect(badPortOfUrl('http://box-a:80')).toBeUndefined();
    expect(badPortOfUrl('http://box-a')).toBeUndefined();
    expect(badPortOfUrl('not a url :6000')).toBeUndefined();
  });

  it('are named with what to do', () => {
    expect(badPortProblem(6000)).toBe(
      "port 6000 is one HTTP clients refuse (fetch's bad ports); choose another",
    );
  });
});
