import { renameSync, writeFileSync } from 'node:fs';

/**
 * The local controller's side of protocol/controller-address.ts: the file in its state directory naming the address
 * its workers reach it at, rewritten each time its API binds, so the workers it spawned before a restart follow it to
 * a new port.
 */

/** The file's name in the state directory. */
export const CONTROLLER_ADDRESS_FILE = 'worker-controller-url';

/** Record `url` as the controller's address: whole (a temporary file renamed over it), readable by its owner only. */
export function recordControllerAddress(path: string, url: string): void {
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, `${url}\n`, { mode: 0o600 });
  renameSync(temp, path);
}
