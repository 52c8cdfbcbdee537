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
  /**
   * libpq `tcp_user_timeout`: unacknowledged data this long closes the connection (a host that vanished). Keepalives
   * catch an idle connection whose peer is gone.
   */
  readonly tcpUserTimeoutMs: number;
}

export const DEFAULT_CONNECTION_BOUNDS: ConnectionBounds = {
  connectTimeoutSeconds: 5,
  statementTimeoutMs: 10_000,
  tcpUserTimeoutMs: 10_000,
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
  const options = params.get('options') ?? '';
  if (!options.includes('statement_timeout'))
    params.set('options', `${options} -c statement_timeout=${bounds.statementTimeoutMs}`.trim());
  // libpq decodes %20 but not URLSearchParams' `+` as a space.
  parsed.search = [...params]
    .map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(value)}`)
    .join('&');
  return parsed.toString();
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
