/**
 * The ports fetch will not connect to: the "bad ports" of the WHATWG Fetch standard
 * (https://fetch.spec.whatwg.org/#bad-port), which Node's fetch (its bundled undici) refuses with "bad port" before it
 * connects. Every fleetwise client reaches the controller through fetch (the CLI, `controller --submit`, the workers),
 * so a controller serving on one of these ports serves nobody. Node exports no copy of the list;
 * test/protocol/fetch-bad-ports.test.ts holds this one to the one the running Node's fetch uses.
 */
export const FETCH_BAD_PORTS: ReadonlySet<number> = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104,
  109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515,
  526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049,
  3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);

/** The reason fetch gives (its error's cause) when it refuses a bad port. */
export const FETCH_BAD_PORT_REASON = 'bad port';

/** Why a port will not do, for the setting or flag that names it. */
export function badPortProblem(port: number): string {
  return `port ${port} is one HTTP clients refuse (fetch's bad ports); choose another`;
}

/**
 * The bad port an http(s) URL names, if it names one. A URL that does not parse names none (its own check says what
 * is wrong with it), nor does one without a port: 80 and 443 are not bad.
 */
export function badPortOfUrl(text: string): number | undefined {
  let port: string;
  try {
    port = new URL(text).port;
  } catch {
    return undefined;
  }
  return port !== '' && FETCH_BAD_PORTS.has(Number(port)) ? Number(port) : undefined;
}
