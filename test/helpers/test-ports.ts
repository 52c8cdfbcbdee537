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
const FIRST_BLOCK = 20_000;
/** The kernel's own default start of the ephemeral range, when it cannot be read. */
const DEFAULT_EPHEMERAL_START = 32_768;

function ephemeralRangeStart(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 0 ? low : DEFAULT_EPHEMERAL_START;
  } catch {
    return DEFAULT_EPHEMERAL_START;
  }
}

const blocks = Math.floor((ephemeralRangeStart() - FIRST_BLOCK) / BLOCK_SIZE);
if (blocks < 1)
  throw new Error(
    `test ports: the kernel's ephemeral range starts at ${ephemeralRangeStart()}, leaving no room below it from ${FIRST_BLOCK}`,
  );
/** VITEST_POOL_ID numbers the workers from 1; outside vitest, the process id picks a block. */
const worker = Number(process.env['VITEST_POOL_ID'] ?? process.pid);
const blockStart = FIRST_BLOCK + ((Math.max(worker, 1) - 1) % blocks) * BLOCK_SIZE;
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
