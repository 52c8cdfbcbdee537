import { createRequire } from 'node:module';

/**
 * pg-native (the node-postgres project's libpq bindings) as the PostgreSQL store uses it: synchronous connect and
 * query, because the StateStore interface is synchronous (a transaction is a plain function, as with SQLite). The
 * package ships no types; this is the part of its API the store calls, checked against pg-native 3.9 and libpq 1.11.
 */

/** libpq's diagnostic fields of the last failed statement (PQresultErrorField). */
export interface NativeErrorFields {
  readonly sqlState?: string;
  readonly messagePrimary?: string;
  readonly messageDetail?: string;
}

/** The libpq connection under a client. */
export interface NativeConnection {
  /** Rows the last command changed, as text ('' for commands that report none). */
  cmdTuples(): string;
  resultErrorFields(): NativeErrorFields | null;
  /** PQtransactionStatus: 0 idle, 1 active, 2 in a transaction, 3 in a failed transaction, 4 connection bad. */
  transactionStatus(): number;
}

export interface NativeClient {
  /** Throws when the connection fails. */
  connectSync(conninfo: string): void;
  /**
   * One statement with `$n` parameters sent as text (PQexecParams), or, without values, any number of statements
   * (PQexec). Rows come back as objects, values parsed by type (int8 stays a string).
   */
  querySync(text: string, values?: readonly (string | null)[]): Record<string, unknown>[];
  end(): void;
  readonly pq: NativeConnection;
}

type NativeClientConstructor = new () => NativeClient;

/** PQtransactionStatus of a connection that is gone. */
export const CONNECTION_BAD = 4;

let constructorCache: NativeClientConstructor | undefined;

/**
 * A new, unconnected client. pg-native is an optional dependency (its libpq binding is compiled at install, which
 * needs libpq's headers and a C++ toolchain): where it did not build, only the PostgreSQL store is unavailable, and
 * choosing it says what to install.
 */
export function newNativeClient(): NativeClient {
  // Loaded on first use, so SQLite-only runs never load libpq.
  constructorCache ??= loadPgNative();
  return new constructorCache();
}

/** pg-native's client class; `moduleName` is there for tests of a missing module. */
export function loadPgNative(moduleName = 'pg-native'): NativeClientConstructor {
  try {
    return createRequire(import.meta.url)(moduleName) as NativeClientConstructor;
  } catch (e) {
    throw new Error(
      'the PostgreSQL state store needs pg-native, which is not installed or did not build ' +
        `(${e instanceof Error ? e.message.split('\n')[0] : String(e)}): install libpq's headers and a C++ ` +
        'toolchain (Debian/Ubuntu: apt-get install libpq-dev build-essential; Amazon Linux: dnf install ' +
        'libpq-devel gcc-c++ make), then `npm install pg-native` where fleetwise is installed',
      { cause: e },
    );
  }
}

/**
 * End a client's connection. libpq's binding closes the connection's poll handle (uv_close) and releases the client
 * to the garbage collector at once, but libuv finishes the close only in a later turn of the event loop: a client
 * collected before that turn leaves freed memory in libuv's closing queue, which aborts the process (an assertion in
 * uv__finish_close). Keeping a reference in a timer until the loop has turned avoids it.
 */
export function endNativeClient(client: NativeClient): void {
  client.end();
  setTimeout(() => client, 10).unref();
}
