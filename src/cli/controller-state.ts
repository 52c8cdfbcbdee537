import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { CloudProvider } from '../cloud/provider.js';
import type { ControllerConfig } from '../controller/config.js';
import { FencedCloudProvider } from '../controller/ha/fenced-provider.js';
import { LeaderElector, type LeadershipView } from '../controller/ha/leader-elector.js';
import { startStandbyServer } from '../controller/ha/standby-server.js';
import type { ControllerLogger } from '../controller/seams.js';
import { PostgresStateStore } from '../controller/state/postgres-state-store.js';
import { connectionBoundsFor } from '../controller/state/postgres/conninfo.js';
import type { PostgresLeaseTable } from '../controller/state/postgres/lease-table.js';
import { SqliteStateStore } from '../controller/state/sqlite-state-store.js';
import type { StateStore } from '../controller/state-store.js';
import { parseListenAddress } from '../controller/api/server.js';
import { ValidationError } from '../core/validation.js';
import { listenError } from './listen-error.js';

/**
 * Where `fleetwise controller` keeps its state, and what follows from it: a SQLite file in the state directory
 * (one controller, which the state-directory lock guarantees), or PostgreSQL (`--state postgres://…`), which any
 * number of controllers share: each contends for the lease, one is active and the others stand by, serving only
 * their health until the lease is theirs (ARCHITECTURE.md "High availability").
 */

/** The lease every controller on one database contends for. */
const LEASE_NAME = 'controller';
/** A controller that lost its lease exits with this (EX_TEMPFAIL): its supervisor starts it again, as a standby. */
export const LEASE_LOST_EXIT_CODE = 75;

export interface ControllerState {
  readonly store: StateStore;
  /** What the state is, for the startup line (never a password). */
  readonly description: string;
  /** True on PostgreSQL: other controllers may share the state, and the lease, not the state directory, decides. */
  readonly shared: boolean;
  /**
   * Stand by until this controller holds the lease (at once without one), then fence the store's writes with its
   * epoch and keep renewing it; `onLost` runs once if the lease is lost, and must stop the controller.
   */
  becomeActive(onLost: (reason: string) => void): Promise<void>;
  /** The provider behind the lease: each call checks it first (the provider itself without a lease). */
  fence(provider: CloudProvider): CloudProvider;
  /** For /healthz, /readyz and the cluster view; undefined without a lease (the controller is active alone). */
  readonly leadership: (() => LeadershipView) | undefined;
  /** Give the lease up (a standby takes over at once) and close the store. */
  close(): void;
}

/** True when the configured state is shared with other controllers (PostgreSQL). */
export function sharesState(config: ControllerConfig): boolean {
  return config.state !== undefined;
}

export function openControllerState(
  config: ControllerConfig,
  options: { readonly nowSeconds: () => number; readonly sqlitePath: string; readonly log: ControllerLogger },
): ControllerState {
  if (config.state === undefined) {
    const store = new SqliteStateStore(options.sqlitePath, { nowSeconds: options.nowSeconds });
    return {
      store,
      description: options.sqlitePath,
      shared: false,
      becomeActive: () => Promise.resolve(),
      fence: (provider) => provider,
      leadership: undefined,
      close: () => store.close(),
    };
  }
  const holderUrl = config.advertiseUrl ?? advertisedUrlOf(config.listen);
  // Every wait for the database bounded by the lease timings: a query blocks the renewals (postgres/conninfo.ts).
  const store = new PostgresStateStore(config.state, {
    nowSeconds: options.nowSeconds,
    bounds: connectionBoundsFor(config.lease),
  });
  const lease = store.lease(LEASE_NAME);
  const elector = new LeaderElector({
    table: lease,
    // Host and pid say who it is; the random part tells a restarted controller from its previous life.
    holder: `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`,
    holderUrl,
    settings: config.lease,
    logger: options.log,
  });
  return {
    store,
    description: store.where,
    shared: true,
    becomeActive: (onLost) => becomeActive(store, lease, elector, config.listen, onLost, options.log),
    fence: (provider) => new FencedCloudProvider(provider, elector),
    leadership: () => elector.view(),
    close: () => {
      elector.release();
      store.close();
    },
  };
}

async function becomeActive(
  store: PostgresStateStore,
  lease: PostgresLeaseTable,
  elector: LeaderElector,
  listen: string | undefined,
  onLost: (reason: string) => void,
  log: ControllerLogger,
): Promise<void> {
  let term = elector.tryAcquire();
  if (term === undefined) {
    // The same words for a bad --listen as the active controller's: whether the other box held the lease then is luck.
    const standby =
      listen === undefined
        ? undefined
        : await startStandbyServer({
            ...parseListenAddress(listen),
            leadership: () => elector.view(),
            retryAfterSeconds: elector.settings.retrySeconds,
          }).catch((e: unknown) => {
            throw listenError(e, listen);
          });
    const view = elector.view();
    process.stdout.write(
      `fleetwise controller: standby on ${store.where}` +
        `${standby === undefined ? '' : `; health on ${standby.url}/healthz`}; ` +
        `the active controller is ${view.holder ?? '(none)'} (lease epoch ${view.epoch ?? '-'})\n`,
    );
    try {
      term = await elector.acquire();
    } finally {
      await standby?.close();
    }
  }
  store.fenceWith(lease, term);
  elector.startRenewing(onLost);
  log.info('active: this controller holds the lease', { epoch: term.epoch, holder: term.holder });
  process.stdout.write(`fleetwise controller: active with lease epoch ${term.epoch} on ${store.where}\n`);
}

/** Bind addresses that mean "every interface": no client can reach them under that name. */
const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '0:0:0:0:0:0:0:0']);

/**
 * The API address to publish with the lease, from the listen address alone (`advertiseUrl` overrides it): a wildcard
 * host becomes this host's name, which the other controllers' machines can usually resolve. Port 0 is refused: the
 * lease is published before the API binds and learns its port, and standbys would send clients to port 0.
 */
export function advertisedUrlOf(
  listen: string | undefined,
  hostName: string = hostname(),
): string | undefined {
  if (listen === undefined) return undefined;
  const parsed = parseListenAddress(listen);
  if (parsed.port === 0)
    throw new ValidationError('--listen', [
      `${listen}: port 0 (any free port) cannot be published with the lease, which names this controller's address ` +
        'to standbys and their clients before the API binds; give a fixed port, or the address clients reach it at ' +
        'with --advertise-url URL',
    ]);
  const host = WILDCARD_HOSTS.has(parsed.host) ? hostName : parsed.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${parsed.port}`;
}
