import { describe, expect, it } from 'vitest';
import { workerEnvironment } from '../../../src/cloud/local/worker-spawner.js';

/** What a local worker process inherits from its controller (it runs as the same user, beside it). */

describe("a local worker's environment", () => {
  it("is the controller's minus every credential of the API and the state, plus the launch's secret", () => {
    const env = workerEnvironment(
      {
        PATH: '/usr/bin',
        FLEETWISE_ADMIN_TOKEN: 'admin',
        FLEETWISE_WORKER_TOKEN: 'cluster-key',
        FLEETWISE_TOKEN: 'client',
        FLEETWISE_METRICS_TOKEN: 'metrics',
        PGPASSWORD: 'postgres',
        AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE',
        FLEETWISE_LOG_LEVEL: 'debug',
      },
      'one-time',
    );
    expect(env).toEqual({
      PATH: '/usr/bin',
      // The object store is written with the cloud's credentials; logging settings carry over.
      AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE',
      FLEETWISE_LOG_LEVEL: 'debug',
      FLEETWISE_LAUNCH_SECRET: 'one-time',
    });
  });

  it("names the controller's address file when the controller keeps one, and never passes on an inherited one", () => {
    const inherited = {
      PATH: '/usr/bin',
      FLEETWISE_CONTROLLER_ADDRESS_FILE: '/elsewhere/worker-controller-url',
    };
    expect(workerEnvironment(inherited, 'one-time', '/state/worker-controller-url')).toEqual({
      PATH: '/usr/bin',
      FLEETWISE_LAUNCH_SECRET: 'one-time',
      FLEETWISE_CONTROLLER_ADDRESS_FILE: '/state/worker-controller-url',
    });
    // A fixed address (--worker-controller-url): nothing to follow.
    expect(workerEnvironment(inherited, 'one-time')).toEqual({
      PATH: '/usr/bin',
      FLEETWISE_LAUNCH_SECRET: 'one-time',
    });
  });
});
