import { describe, expect, it } from 'vitest';
import { curveOf } from '../../src/core/latency-curves.js';
import { inNoMoveWindow } from '../../src/core/model.js';
import { Admission } from '../../src/queue/admission.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { CommandIssuer } from '../../src/world/commands.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import { networkConfigSchema, resolveNetworkConfig } from '../../src/world/network-config.js';
import type { SimJob } from '../../src/world/entities.js';
import { buildSnapshot } from '../../src/world/scheduler-view.js';
import { buildSimJobs } from '../../src/world/trace-jobs.js';
import { importWorld } from '../../src/world/world-io.js';
import { WorldState } from '../../src/world/world-state.js';
import { EventLog, ScriptedScheduler, testCatalog, trace, traceJob, traceTask } from '../sim/sim-fixtures.js';

describe('the engine’s scheduler view', () => {
  it('keeps the room a starting job holds on a healthy instance when another of its instances is going away', () => {
    // B: 2 tasks, each a whole small.x; C: 1 task as big, queued.
    const catalog = testCatalog();
    const state = new WorldState(
      buildSimJobs(
        trace(
          traceJob('B', { tasks: [traceTask('node0'), traceTask('node1')] }),
          traceJob('C', { arrivalSeconds: 0 }),
        ),
        catalog,
      ),
      () => undefined,
    );
    for (const job of state.jobs) state.enqueue(job as SimJob);
    const commands = new CommandIssuer(state, catalog, new Admission(catalog, { caps: {} }), true);
    const start = (taskId: string, instanceId: string) =>
      ({
        kind: 'start-task',
        jobId: 'B',
        taskId,
        instanceId,
        instanceIsNew: true,
        afterStopOf: [],
        capacityFrom: [],
      }) as const;
    commands.apply([
      { kind: 'launch-instance', instanceId: 'p1', typeName: 'small.x' },
      { kind: 'launch-instance', instanceId: 'p2', typeName: 'small.x' },
      start('B/node0', 'p1'),
      start('B/node1', 'p2'),
    ]);
    // A spot notice drains i-2 while B is still starting (pinned).
    const i2 = state.instances.get('i-2');
    if (i2 === undefined) throw new Error('no i-2');
    commands.requestTermination(i2);

    const snapshot = buildSnapshot(state.now, state.liveJobs.values(), state.assignable.values());
    expect(snapshot.jobs.find((j) => j.id === 'B')).toMatchObject({
      taskIds: ['B/node0'],
      reconfigurable: false,
    });
    expect(snapshot.tasks.filter((t) => t.jobId === 'B')).toMatchObject([
      { id: 'B/node0', instanceId: 'i-1' },
    ]);
    expect(snapshot.instances.map((i) => [i.id, i.taskIds])).toEqual([['i-1', ['B/node0']]]);

    // So Eva plans C elsewhere, not into B's room on i-1.
    const plan = new EvaScheduler(catalog).plan(snapshot);
    expect(plan.configuration.instances.find((i) => i.id === 'i-1')?.taskIds).toEqual(['B/node0']);
    expect(plan.configuration.instances.some((i) => i.taskIds.includes('C/node0'))).toBe(true);
  });

  it('reports a job’s throughput as its workers measure it: the co-location rate times what the network costs it', () => {
    // J's two tasks run in two zones 400 µs apart, J/node0 next to K's task (each slows the other to 0.7): J runs at
    // 0.7 × P_job. Reported at 0.7, Eva would divide by its estimate of P_job and learn co-location costs nothing.
    const catalog = testCatalog();
    const scheduler = new ScriptedScheduler('placing', (_snapshot, round) =>
      round === 0
        ? {
            instances: [
              {
                id: 'new-1',
                typeName: 'big.x',
                isNew: true,
                taskIds: ['J/node0', 'K/node0'],
                placement: { zone: 'testa' },
              },
              {
                id: 'new-2',
                typeName: 'small.x',
                isNew: true,
                taskIds: ['J/node1'],
                placement: { zone: 'testb' },
              },
            ],
          }
        : undefined,
    );
    const result = runSimulation({
      trace: trace(
        {
          ...traceJob('J', { iterations: 36_000, tasks: [traceTask('node0'), traceTask('node1')] }),
          network: { sensitivity: 'memcached', pattern: 'star', gibPerHour: 0 },
        },
        traceJob('K', { iterations: 36_000 }),
      ),
      scheduler,
      catalog,
      groundTruth: constantPairwise(0.7),
      network: {
        config: resolveNetworkConfig(
          networkConfigSchema.parse({
            zones: ['testa', 'testb'],
            domainRttMicroseconds: { 'cross-zone': 400 },
            noise: { withinPlacementGroup: [1, 1], betweenDomains: [1, 1] },
          }),
          'test',
        ),
        seed: 1,
      },
    });
    const p = curveOf('memcached').at(400);
    expect(p).toBeLessThan(0.9);
    expect(result.jobs.find((j) => j.id === 'J')?.appPerformance).toBeCloseTo(p, 12);
    // Every round while both jobs run shows J at 0.7 × P_job and K at 0.7.
    const running = scheduler.observations.filter((o) => o.length === 3);
    expect(running.length).toBeGreaterThan(3);
    for (const round of running) {
      const value = new Map(round.map((o) => [o.taskId, o.normalizedThroughput]));
      expect(value.get('J/node0')).toBeCloseTo(0.7 * p, 12);
      expect(value.get('J/node1')).toBeCloseTo(0.7 * p, 12);
      expect(value.get('K/node0')).toBeCloseTo(0.7, 12);
    }
  });

  it('reports a job initializing on its instances inside its no-move window, from when it will make progress', () => {
    // A launches on a small.x placed at 0 (registered at 60, task launched at 65) and initializes for 400 s: every
    // round from 120 to 420 shows it reconfigurable, making progress from 465 (as the controller's snapshot does).
    const catalog = testCatalog();
    const scheduler = new ScriptedScheduler('placing', (_snapshot, round) =>
      round === 0
        ? { instances: [{ id: 'new-1', typeName: 'small.x', isNew: true, taskIds: ['A/node0'] }] }
        : undefined,
    );
    const log = new EventLog();
    runSimulation({
      trace: trace({ ...traceJob('A', { iterations: 3600, initDelaySeconds: 400 }), noMoveSeconds: 600 }),
      scheduler,
      catalog,
      groundTruth: constantPairwise(1),
      roundSeconds: 60,
      onEvent: log.record,
    });
    const launched = log.time('launched', { jobId: 'A' });
    const active = log.time('job-active', { jobId: 'A' });
    expect(active).toBe(launched + 400);
    const initializing = scheduler.snapshots.filter((s) => s.nowSeconds > launched && s.nowSeconds < active);
    expect(initializing.length).toBeGreaterThanOrEqual(5);
    for (const snapshot of initializing) {
      const job = snapshot.jobs.find((j) => j.id === 'A');
      expect(job).toMatchObject({ reconfigurable: true, runningSinceSeconds: active, noMoveSeconds: 600 });
      expect(inNoMoveWindow(job as NonNullable<typeof job>, snapshot.nowSeconds)).toBe(true);
    }
    // Making progress, it stays in the window for 600 s from then, and leaves it after.
    const progressing = scheduler.snapshots.filter((s) => s.nowSeconds >= active);
    const at = (now: number) => {
      const snapshot = progressing.find((s) => s.nowSeconds === now);
      const job = snapshot?.jobs.find((j) => j.id === 'A');
      if (job === undefined) throw new Error(`no round at ${now} showing A`);
      expect(job.runningSinceSeconds).toBe(active);
      return inNoMoveWindow(job, now);
    };
    expect(at(1020)).toBe(true);
    expect(at(1080)).toBe(false);
  });

  it('reports an imported world’s initializing job inside its no-move window, from its pending activation', () => {
    // A world as a prediction gets it (the controller's, or the engine's own): A's task runs on i-1, its activation
    // due at 500; at 200 A is initializing.
    const catalog = testCatalog();
    const spec = { ...traceJob('A', { iterations: 3600, initDelaySeconds: 400 }), noMoveSeconds: 600 };
    const state = new WorldState(buildSimJobs(trace(spec), catalog), () => undefined);
    importWorld(
      state,
      {
        nowSeconds: 200,
        jobs: [
          {
            spec,
            status: 'executing',
            active: false,
            completedIterations: 0,
            startSeconds: null,
            migrations: 0,
            tasks: [
              { name: 'node0', state: 'running', committedInstanceId: 'i-1', occupyingInstanceId: 'i-1' },
            ],
          },
        ],
        instances: [
          { id: 'i-1', typeName: 'small.x', lifecycle: 'running', assignable: true, images: ['img-a'] },
        ],
        events: [
          { kind: 'round', timeSeconds: 300 },
          { kind: 'job-active', timeSeconds: 500, jobId: 'A', token: 0 },
        ],
      },
      catalog,
    );
    const snapshot = buildSnapshot(state.now, state.liveJobs.values(), state.assignable.values());
    const job = snapshot.jobs.find((j) => j.id === 'A');
    expect(job).toMatchObject({ reconfigurable: true, runningSinceSeconds: 500 });
    expect(inNoMoveWindow(job as NonNullable<typeof job>, 200)).toBe(true);
  });
});
