import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * Ports for the servers tests start, most of them in child processes that bind the port later and bind it again after
 * a restart (a controller killed and started on its state, a store that stops listening through an outage).
 *
 * A port the kernel hands out for listen(0) is free again as soon as it is probed, and it comes from the ephemeral
 * range every file running beside it draws from too, through its own listen(0) and every outgoing connection: a
 * controller restarted on its port once found another file's standby controller there, and its worker registered
 * with that one. So ports come from below the ephemeral range, from a block of their own per vitest worker, each
 * handed out once per worker; the probe still skips one something else listens on.
 */
const BLOCK_SIZE = 1_000;
/** Below the ephemeral range: clear of the well-known ports and of what services usually listen on. */
const FIRST_BLOCK = 20_000;
const LAST_PORT = 65_535;
/** The kernel's own default ephemeral range, when it cannot be read. */
const DEFAULT_EPHEMERAL_RANGE: readonly [number, number] = [32_768, 60_999];

function ephemeralRange(): readonly [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    return Number.isInteger(low) && Number.isInteger(high)
      ? [low as number, high as number]
      : DEFAULT_EPHEMERAL_RANGE;
  } catch {
    return DEFAULT_EPHEMERAL_RANGE;
  }
}

/** The first port of each block: below the ephemeral range, or above it on a host whose range starts low. */
function blockStarts(): number[] {
  const [low, high] = ephemeralRange();
  const below = Math.max(0, Math.floor((low - FIRST_BLOCK) / BLOCK_SIZE));
  if (below > 0) return Array.from({ length: below }, (_, i) => FIRST_BLOCK + i * BLOCK_SIZE);
  const above = Math.floor((LAST_PORT - high) / BLOCK_SIZE);
  if (above > 0) return Array.from({ length: above }, (_, i) => high + 1 + i * BLOCK_SIZE);
  throw new Error(
    `test ports: the kernel's ephemeral range ${low}–${high} leaves no block of ${BLOCK_SIZE} ports`,
  );
}

const starts = blockStarts();
/** VITEST_POOL_ID numbers the workers from 1; outside vitest, the process id picks a block. */
const worker = Number(process.env['VITEST_POOL_ID'] ?? process.pid);
const blockStart = starts[(Math.max(worker, 1) - 1) % starts.length] as number;
let next = 0;

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port on 127.0.0.1 that nothing listens on and that no other test in this run is given. */
export async function freePort(): Promise<number> {
  for (let tried = 0; tried < BLOCK_SIZE; tried += 1) {
    const port = blockStart + (next % BLOCK_SIZE);
    next += 1;
    if (await canListen(port)) return port;
  }
  throw new Error(`test ports: every port of ${blockStart}–${blockStart + BLOCK_SIZE - 1} is taken`);
}
