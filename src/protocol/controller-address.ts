/**
 * How a worker a local controller spawned finds that controller again after a restart on another address (`--listen
 * HOST:0` binds a free port each time): the controller keeps the address its workers reach it at in a file of its
 * state directory (cloud/local/controller-address-file.ts writes it), and names that file to each worker it spawns in
 * CONTROLLER_ADDRESS_FILE_ENV. The worker reads it when a request to the controller fails, and sends the request to the
 * address it names when that has changed (worker/controller-client.ts). A worker given no file (an EC2 one, a worker
 * started by hand) keeps the address it was started with.
 *
 * The file holds one line, the controller's URL (`http://127.0.0.1:40213`), and is replaced whole (written aside,
 * then renamed), so a reader never finds half of one.
 */
export const CONTROLLER_ADDRESS_FILE_ENV = 'FLEETWISE_CONTROLLER_ADDRESS_FILE';

/** The controller address file the environment names to a worker; undefined when it names none. */
export function controllerAddressFileOf(
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  const path = env[CONTROLLER_ADDRESS_FILE_ENV];
  return path === undefined || path.trim() === '' ? undefined : path;
}

/** The URL a controller address file holds, or undefined when it holds none (empty, not an http(s) URL). */
export function parseControllerAddress(text: string): string | undefined {
  const line = text.trim();
  if (line === '' || /\s/.test(line)) return undefined;
  let url: URL;
  try {
    url = new URL(line);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  return line.replace(/\/+$/, '');
}
