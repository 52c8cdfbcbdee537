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

const SCHEMES = ['postgres', 'postgresql'];

const EXPECTED =
  'expected postgres://user@host:port/database, or with several hosts ' +
  'postgres://user@host1:port1,host2:port2/database';

/**
 * A connection URI cut where libpq cuts it (fe-connect.c, conninfo_uri_parse_options), not where WHATWG's URL does:
 * libpq takes a list of hosts (`h1:p1,h2:p2`, tried in turn) that no URL parser accepts. Each part is as written.
 */
interface UriParts {
  readonly scheme: string;
  /** `user[:password]`, when an `@` comes before the first `/`. */
  readonly userinfo: string | undefined;
  /** `host[:port]` or `[ipv6][:port]`, comma-separated; may be empty (the default host). */
  readonly hosts: string;
  /** `/database`, or empty. */
  readonly path: string;
  /** After the first `?` that follows the hosts. */
  readonly query: string | undefined;
}

function splitUri(text: string): UriParts | undefined {
  const head = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(text);
  if (head === null) return undefined;
  let at = head[0].length;
  // libpq reads credentials when an `@` comes before any `/`, wherever a `?` is.
  const credentialsEnd = text.slice(at).search(/[@/]/);
  let userinfo: string | undefined;
  if (credentialsEnd !== -1 && text[at + credentialsEnd] === '@') {
    userinfo = text.slice(at, at + credentialsEnd);
    at += credentialsEnd + 1;
  }
  let end = at;
  for (let bracket = false; end < text.length; end += 1) {
    const c = text[end];
    if (bracket) bracket = c !== ']';
    else if (c === '[') bracket = true;
    else if (c === '/' || c === '?') break;
  }
  const queryAt = text.indexOf('?', end);
  return {
    scheme: head[1] ?? '',
    userinfo,
    hosts: text.slice(at, end),
    path: queryAt === -1 ? text.slice(end) : text.slice(end, queryAt),
    query: queryAt === -1 ? undefined : text.slice(queryAt + 1),
  };
}

/** What is wrong with a host list as libpq reads it (`host[:port]` or `[IPv6][:port]`, comma-separated), if aught. */
function hostsProblem(hosts: string): string | undefined {
  for (const spec of hosts.split(',')) {
    const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(spec);
    const colon = spec.indexOf(':');
    const [host, port] =
      bracketed !== null
        ? [bracketed[1] ?? '', bracketed[2] ?? '']
        : colon === -1
          ? [spec, '']
          : [spec.slice(0, colon), spec.slice(colon + 1)];
    if (/[\s[\]@]/.test(host)) return `"${spec}" is not host:port or [IPv6 address]:port`;
    // Empty: libpq's default port.
    if (port !== '' && !(/^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535))
      return `port "${port}" of host "${host}" is not a port number (1-65535)`;
  }
  return undefined;
}

/** Why `text` is not a URL the PostgreSQL store connects with, or undefined when it is one. */
function urlProblem(text: string): string | undefined {
  const parts = splitUri(text);
  if (parts === undefined) return `${redactUrl(text)} is not a URL (${EXPECTED})`;
  if (!SCHEMES.includes(parts.scheme.toLowerCase()))
    return `${redactUrl(text)}: expected a postgres:// or postgresql:// URL, not ${parts.scheme.toLowerCase()}://`;
  const hosts = hostsProblem(parts.hosts);
  return hosts === undefined ? undefined : `${redactUrl(text)}: ${hosts} (${EXPECTED})`;
}

/**
 * True for a URL the PostgreSQL store accepts (`postgres://` or `postgresql://`), with one host or libpq's list of
 * hosts to try in turn (`postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write`).
 */
export function isPostgresUrl(text: string): boolean {
  return urlProblem(text) === undefined;
}

/**
 * The URL with the bounds added as parameters. Everything else goes to libpq as written (lowercase scheme aside), so
 * a host list and libpq's own parameters (`target_session_attrs`, `sslmode`) mean what libpq says they mean.
 */
export function boundedConninfo(url: string, bounds: ConnectionBounds = DEFAULT_CONNECTION_BOUNDS): string {
  const problem = urlProblem(url);
  const parts = splitUri(url);
  if (problem !== undefined || parts === undefined) throw new StateStoreError(problem ?? url);
  const params = new URLSearchParams(parts.query ?? '');
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
  const query = [...params]
    .map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(value)}`)
    .join('&');
  const userinfo = parts.userinfo === undefined ? '' : `${parts.userinfo}@`;
  return `${parts.scheme.toLowerCase()}://${userinfo}${parts.hosts}${parts.path}?${query}`;
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

/** libpq's parameters that hold a secret (dispchar `*` in PQconndefaults), masked wherever a URL is shown. */
const SECRET_PARAMETERS = new Set(['password', 'sslpassword', 'oauth_client_secret']);

/**
 * The URL without its secrets, for messages and logs: the password of `user:password@`, and the value of every secret
 * parameter (`?password=…`, `?sslpassword=…`). Use PGPASSWORD or ~/.pgpass rather than a password in the URL.
 */
export function redactUrl(url: string): string {
  const parts = splitUri(url);
  if (parts === undefined) return redactKeywords(url);
  let userinfo = '';
  if (parts.userinfo !== undefined) {
    const colon = parts.userinfo.indexOf(':');
    userinfo =
      colon === -1 || colon === parts.userinfo.length - 1
        ? `${parts.userinfo}@`
        : `${parts.userinfo.slice(0, colon)}:***@`;
  }
  const query =
    parts.query === undefined
      ? ''
      : `?${parts.query
          .split('&')
          .map((pair) => {
            const eq = pair.indexOf('=');
            if (eq === -1) return pair;
            const key = pair.slice(0, eq);
            return SECRET_PARAMETERS.has(decodedKey(key)) ? `${key}=***` : pair;
          })
          .join('&')}`;
  return `${parts.scheme}://${userinfo}${parts.hosts}${parts.path}${query}`;
}

/** A parameter name as libpq reads it (percent-decoded), lowercase. */
function decodedKey(key: string): string {
  try {
    return decodeURIComponent(key).toLowerCase();
  } catch {
    return key.toLowerCase();
  }
}

/** Text that is no URL (a libpq `key=value` string given by mistake): its secret values masked all the same. */
function redactKeywords(text: string): string {
  return text
    .replace(/:\/\/([^:@/]*):[^@/]*@/, '://$1:***@')
    .replace(
      /(^|[\s?&])(password|sslpassword|oauth_client_secret)(\s*=\s*)('(?:\\.|[^'\\])*'|[^\s&]*)/gi,
      '$1$2$3***',
    );
}
