import { afterEach, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { ManualClock } from '../../src/controller/clock.js';
import type { Controller } from '../../src/controller/controller.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { StartMeasure } from '../../src/controller/worker-task-control.js';
import type { Catalog } from '../../src/core/catalog.js';
import type { TaskReport } from '../../src/protocol/worker-protocol.js';
import {
  catalog,
  CPU_SMALL,
  jobSpec,
  liveRecords,
  priceOf,
  rig,
  workerTaskControlFor,
  type Rig,
} from './controller-fixtures.js';

/**
 * A price refresh (price-refresh.ts → Controller.applyCatalog) reaches every part of the controller that prices
 * something, not only admission and the plan: the reconciler's launch gate and the fleet in transit it counts, the
 * API's dry runs, and the workers' co-start holds.
 */

/** `catalog` with `typeName` at `costPerHour` on demand (a new object, as a refresh makes). */
function repriced(typeName: string, costPerHour: number, from: Catalog = catalog): Catalog {
  return {
    ...from,
    types: from.types.map((t) => (t.name === typeName ? { ...t, costPerHour } : t)),
  };
}

/** c7i.xlarge is the cheapest host of CPU_SMALL; 0.30 makes it dearer than the $0.2/h cap below. */
const DEAR = 0.3;

describe('a price refresh reaches the reconciler', () => {
  it('lets out a launch that only the refreshed (lower) price fits under the cap', async () => {
    // Started at a dear c7i.xlarge, refreshed to the bundled $0.1785/h: the plan launches one under the $0.2/h cap.
    const r = rig({ caps: { maxCostPerHour: 0.2 } }, { catalog: repriced('c7i.xlarge', DEAR) });
    await r.controller.applyCatalog(catalog);
    const job = r.controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await r.controller.runRound('test');
    // The launch gate prices the launch as the plan did: it goes out at once, not held at the start price for ever.
    expect(r.cloud.calls.launch).toBe(1);
    expect(liveRecords(r.store).map((i) => [i.typeName, i.cloudId !== undefined])).toEqual([
      ['c7i.xlarge', true],
    ]);
    expect(r.store.getJob(job.id)?.state).not.toBe('queued');
  });

  it('counts the fleet in transit at the refreshed (higher) prices', async () => {
    // $0.4/h holds two c7i.xlarge at $0.1785/h, not at $0.30/h.
    const r = rig({ caps: { maxCostPerHour: 0.4 } });
    r.controller.submit(jobSpec('a', CPU_SMALL), 'research');
    await r.controller.runRound('test');
    expect(r.cloud.calls.launch).toBe(1);
    // A second launch planned under the cap at the start prices, held back by a throttled call.
    r.controller.submit(jobSpec('b', CPU_SMALL), 'research');
    r.cloud.throttleNextLaunches = 1;
    await r.controller.runRound('test');
    expect(r.cloud.calls.launch).toBe(2);
    const held = liveRecords(r.store).filter((i) => i.cloudId === undefined);
    expect(held.map((i) => i.typeName)).toEqual(['c7i.xlarge']);

    // The refresh raises c7i.xlarge to $0.30/h: the launched one and the held one would cost $0.60/h.
    await r.controller.applyCatalog(repriced('c7i.xlarge', DEAR));
    r.clock.advance(60); // past the launch's retry delay (10 s at first)
    const { progress } = await r.controller.reconcile();
    expect(progress?.launched).toEqual([]);
    expect(progress?.deferredLaunches).toBe(1);
    expect(r.cloud.calls.launch).toBe(2);
    expect(r.store.getInstance(held[0]!.id)?.cloudId).toBeUndefined();
  });
});

describe('a price refresh reaches the API', () => {
  let server: ApiServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it("prices a dry run at the controller's current catalog", async () => {
    const { controller } = rig();
    const admin = 'admin-token-0123456789abcdef';
    // Wired as startup.ts wires it.
    server = await startApiServer(controller, {
      listen: '127.0.0.1:0',
      adminToken: admin,
      catalog: () => controller.catalog,
    });
    const dryRun = async (): Promise<{ tasks: { instanceType: string; costPerHour: number }[] }> => {
      const res = await fetch(`${server!.url}/v1/jobs?dryRun=true`, {
        method: 'POST',
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          name: 'small',
          team: 'research',
          expectedDurationSeconds: 3600,
          tasks: [{ name: 'main', image: 'busybox:latest', demand: CPU_SMALL }],
        }),
      });
      expect(res.status).toBe(200);
      return (await res.json()) as { tasks: { instanceType: string; costPerHour: number }[] };
    };
    expect((await dryRun()).tasks).toMatchObject([{ instanceType: 'c7i.xlarge', costPerHour: 0.1785 }]);

    // c7i.xlarge 10× dearer: c7i.2xlarge is now the cheapest host, as the plan would choose.
    await controller.applyCatalog(repriced('c7i.xlarge', 1.785));
    expect((await dryRun()).tasks).toMatchObject([
      { instanceType: 'c7i.2xlarge', costPerHour: priceOf('c7i.2xlarge') },
    ]);
  });
});

describe('a price refresh reaches the co-start barrier', () => {
  it('prices a hold after the refresh at the refreshed price', async () => {
    const clock = new ManualClock();
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const measured: StartMeasure[] = [];
    const current: { controller?: Controller } = {};
    // Wired as build-controller.ts wires it: the endpoint exists before the controller whose catalog it reads.
    const workers = workerTaskControlFor(store, clock, {
      coStart: true,
      catalog: () => current.controller?.catalog ?? catalog,
      onStartMeasured: (_jobId, m) => void measured.push(m),
    });
    const r: Rig = rig({ coStartTimeoutSeconds: 600 }, { store, clock, tasks: workers, workers });
    current.controller = r.controller;
    const job = r.controller.submit(jobSpec('gang', CPU_SMALL, { replicas: 2 }), 'research');
    await r.controller.runRound();
    await r.controller.reconcile();
    const token = (id: string): string => `worker-token-${id}-0123456789abcdef`;
    for (const i of store.listInstances({ states: ['running'] })) store.setWorkerToken(i.id, token(i.id));
    await r.controller.reconcile();
    const on = new Map(store.listTasks({ jobId: job.id }).map((t) => [t.id, t.instanceId as string]));
    expect([...on.values()].map((id) => store.getInstance(id)?.typeName)).toEqual([
      'c7i.xlarge',
      'c7i.xlarge',
    ]);
    const beat = (taskId: string, state: TaskReport['state']): void =>
      void workers.heartbeat(token(on.get(taskId)!), { tasks: [{ taskId, state, attempt: 1 }] });

    // Each worker is told to prepare its task and hold it.
    for (const id of on.values()) workers.heartbeat(token(id), { tasks: [] });
    await r.controller.applyCatalog(repriced('c7i.xlarge', DEAR));
    const [t0, t1] = [`${job.id}.0`, `${job.id}.1`];
    beat(t0, 'ready');
    clock.advance(30);
    // Both heard ready now (a worker silent since its report would not be released onto).
    beat(t0, 'ready');
    beat(t1, 'ready');
    await r.controller.reconcile();
    expect(store.getJob(job.id)?.state).toBe('running');
    beat(t0, 'running');
    beat(t1, 'running');
    // t0 held its share of its c7i.xlarge for 30 s before the release, at the refreshed price.
    const type = catalog.types.find((t) => t.name === 'c7i.xlarge')!;
    const share = Math.max(4 / type.capacity[1], 8 / type.capacity[2]);
    expect(measured).toHaveLength(1);
    expect(measured[0]?.barrierIdleCost).toBeCloseTo((30 * share * DEAR) / 3600, 9);
  });
});
