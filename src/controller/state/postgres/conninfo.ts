import { DEFAULT_LEASE_SETTINGS, type LeaseSettings } from '../../ha/lease.js';
import { StateStoreError } from '../../state-store.js';

/**
 * The libpq connection URL the store connects with: the operator's `postgres://…` URL plus bounds on every wait, so
 * a database that stops answering fails a query within seconds instead of freezing the controller (a synchronous
 * query blocks the whole process while it waits). Settings the URL already has are kept.
 */

export interface ConnectionBounds {
  /** libpq `connect_timeout` (seconds; libpq counts at least 2). */
  readonly connectTimeoutSeconds: number;
  /** Server `statement_timeout`: no statement runs longer. */
  readonly statementTimeoutMs: number;
  /** Server `lock_timeout`: no statement waits longer for a lock another session holds. */
  readonly lockTimeoutMs: number;
  /**
   * Server `idle_in_transaction_session_timeout`: a session that left a transaction open and went quiet this long (its
   * process paused or frozen) is ended, and the row locks it held (the `counters` row every write takes) with it.
   */
  readonly idleInTransactionTimeoutMs: number;
  /**
   * libpq `tcp_user_timeout`: unacknowledged data this long closes the connection (a host that vanished). Keepalives
   * catch an idle connection whose peer is gone.
   */
  readonly tcpUserTimeoutMs: number;
}

/**
 * The bounds for a controller holding a lease of these timings. A query blocks the event loop (pg-native is
 * synchronous), so the renewal timer waits for it: the holder last renewed up to a retry period ago and must renew
 * again before its renew deadline, so a statement may take half of `renewDeadlineSeconds − retrySeconds` (one slow
 * statement and the renewal after it, itself bounded, still fit) and a lock wait half of that. A session idle in a
 * transaction is ended after half of the fencing margin (`durationSeconds − renewDeadlineSeconds`): a holder frozen
 * inside a write transaction loses it, and its locks, before its lease can expire and pass to the next controller.
 * The lease schema (ha/lease.ts) refuses timings that leave too little room for either, and timings over a day, so
 * that every value here stays within what PostgreSQL and libpq take (2^31 − 1 ms, or seconds for connect_timeout).
 */
export function connectionBoundsFor(lease: LeaseSettings): ConnectionBounds {
  const statementTimeoutMs = Math.floor(((lease.renewDeadlineSeconds - lease.retrySeconds) * 1000) / 2);
  return {
    // A (re)connection blocks the event loop as well; libpq counts at least 2 s.
    connectTimeoutSeconds: Math.max(2, Math.floor(statementTimeoutMs / 1000)),
    statementTimeoutMs,
    lockTimeoutMs: Math.floor(statementTimeoutMs / 2),
    idleInTransactionTimeoutMs: Math.floor(((lease.durationSeconds - lease.renewDeadlineSeconds) * 1000) / 2),
    tcpUserTimeoutMs: statementTimeoutMs,
  };
}

/**
 * For the default lease (15/10/2 s): statements 4 s, lock waits 2 s, idle in a transaction 2.5 s, connect 4 s. These
 * are for a controller; a tool that holds no lease connects with TOOL_CONNECTION_BOUNDS.
 */
export const DEFAULT_CONNECTION_BOUNDS: ConnectionBounds = connectionBoundsFor(DEFAULT_LEASE_SETTINGS);

/**
 * For a tool that reads the state and holds no lease (`fleetwise export-trace`): no renewal waits on it, and it reads
 * a large state in one transaction with its own work between the queries, so nothing ends it for idling in that
 * transaction (0: no timeout) and a statement may run for minutes. A database that vanished or stopped answering
 * still fails it: the connect, TCP and keepalive bounds stay, and so does a lock wait bound (a migration's exclusive
 * lock held for long).
 */
export const TOOL_CONNECTION_BOUNDS: ConnectionBounds = {
  connectTimeoutSeconds: 10,
  statementTimeoutMs: 10 * 60_000,
  lockTimeoutMs: 60_000,
  idleInTransactionTimeoutMs: 0,
  tcpUserTimeoutMs: 30_000,
};

const SCHEMES = ['postgres:', 'postgresql:'];

/** True for a URL the PostgreSQL store accepts (`postgres://` or `postgresql://`). */
export function isPostgresUrl(text: string): boolean {
  try {
    return SCHEMES.includes(new URL(text).protocol);
  } catch {
    return false;
  }
}

export function boundedConninfo(url: string, bounds: ConnectionBounds = DEFAULT_CONNECTION_BOUNDS): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new StateStoreError(`${redactUrl(url)} is not a URL (expected postgres://user@host:port/database)`);
  }
  if (!SCHEMES.includes(parsed.protocol))
    throw new StateStoreError(
      `${redactUrl(url)}: expected a postgres:// or postgresql:// URL, not ${parsed.protocol}//`,
    );
  const params = parsed.searchParams;
  const setDefault = (key: string, value: string): void => {
    if (!params.has(key)) params.set(key, value);
  };
  setDefault('connect_timeout', String(bounds.connectTimeoutSeconds));
  setDefault('tcp_user_timeout', String(bounds.tcpUserTimeoutMs));
  setDefault('keepalives', '1');
  setDefault('keepalives_idle', '5');
  setDefault('keepalives_interval', '2');
  setDefault('keepalives_count', '3');
  setDefault('application_name', 'fleetwise');
  // Server settings ride in `options`; one the operator set there already is kept.
  let options = params.get('options') ?? '';
  const serverSettings: readonly (readonly [string, number])[] = [
    ['statement_timeout', bounds.statementTimeoutMs],
    ['lock_timeout', bounds.lockTimeoutMs],
    ['idle_in_transaction_session_timeout', bounds.idleInTransactionTimeoutMs],
  ];
  const present = serverSettingNames(options);
  for (const [name, value] of serverSettings)
    if (!present.has(name)) options = `${options} -c ${name}=${value}`.trim();
  if (options !== '') params.set('options', options);
  // libpq decodes %20 but not URLSearchParams' `+` as a space.
  parsed.search = [...params]
    .map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(value)}`)
    .join('&');
  return parsed.toString();
}

/**
 * The names of the server settings a libpq `options` value sets, in its `-c name=value`, `-cname=value` and
 * `--name=value` forms (PostgreSQL's command-line forms; a dash in a name means an underscore). Whole names, so
 * `deadlock_timeout` does not count as `lock_timeout`.
 */
function serverSettingNames(options: string): Set<string> {
  const names = new Set<string>();
  const words = options.split(/\s+/).filter((w) => w !== '');
  const add = (assignment: string): void => {
    const name = assignment.split('=', 1)[0] ?? '';
    if (name !== '') names.add(name.replaceAll('-', '_').toLowerCase());
  };
  for (let i = 0; i < words.length; i += 1) {
    const word = words[i] ?? '';
    if (word === '-c') add(words[(i += 1)] ?? '');
    else if (word.startsWith('--')) add(word.slice(2));
    else if (word.startsWith('-c')) add(word.slice(2));
  }
  return names;
}

/** The URL without its password, for messages and logs (use PGPASSWORD or ~/.pgpass rather than a password in it). */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return url.replace(/:\/\/([^:@/]*):[^@/]*@/, '://$1:***@');
  }
}
