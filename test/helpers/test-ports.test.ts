import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from './test-ports.js';

describe('freePort', () => {
  it('hands out distinct ports outside the ephemeral range, skipping one something listens on', async () => {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    const first = await freePort();
    // Something else takes the next port of the block: it is skipped.
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(first + 1, '127.0.0.1', resolve));
    try {
      const ports = [first, ...(await Promise.all([freePort(), freePort(), freePort()]))];
      expect(new Set(ports).size).toBe(ports.length);
      expect(ports).not.toContain(first + 1);
      for (const port of ports)
        expect(port < (low as number) || port > (high as number), String(port)).toBe(true);
    } finally {
      await new Promise<void>((resolve) => squatter.close(() => resolve()));
    }
  });
});
