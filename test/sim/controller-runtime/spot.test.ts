import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../../src/cloud/catalog-file.js';
import { runSimulation } from '../../../src/sim/run-simulation.js';
import {
  executeRun,
  groundTruthFor,
  loadRequestTrace,
  noticeHandlingOf,
  type RunRequest,
} from '../../../src/sim/run-request.js';
import { executeControllerRun } from '../../../src/sim/controller-runtime/execute.js';
import { createScheduler, type SchedulerName } from '../../../src/scheduler/registry.js';
import { runControllerSimulation } from '../../../src/sim/controller-runtime/run-controller.js';
import { withControllerJobIds } from '../../../src/sim/traces/controller-job-ids.js';
import type { SpotSimulation } from '../../../src/world/spot-world.js';
import { trace, traceJob } from '../sim-fixtures.js';

/**
 * Spot in the controller runtime: the real controller buys spot where the plan says, hears EC2's interruption notice
 * as the interruption queue delivers it, drains the instance and plans its tasks elsewhere while the host's worker
 * checkpoints them; karpenter-spot drains it too but evicts its tasks with no checkpoint, and skypilot-spot hears nothing:
 * their jobs lose the work since their last periodic checkpoint. Measured on
 * cuts of pai_200 against the engine, whose spot world draws the reclaims the same way (per launch: the nth instance
 * launched lives as long in both), with the jobs named as the controller names them, so that the two plan alike.
 */
const catalog = loadCatalogFile();
const groundTruth = groundTruthFor({});
const CHECKPOINT_SECONDS = 30 * 60;

async function both(
  name: SchedulerName,
  jobs: number,
  burstsPerPoolPerMonth = 0,
  rebalanceShare = 0,
  falseRebalancesPerMonth = 0,
) {
  const trace = withControllerJobIds(loadRequestTrace({ trace: { format: 'eva', jobs } }, catalog));
  const spot: SpotSimulation = {
    seed: 0,
    noticeHandling: noticeHandlingOf(name),
    burstsPerPoolPerMonth,
    rebalanceShare,
    falseRebalancesPerMonth,
  };
  const scheduler = () => createScheduler(name, { catalog, interferenceProfile: groundTruth, spot: true });
  const engine = runSimulation({ trace, scheduler: scheduler(), catalog, groundTruth, spot });
  const events = { interruptions: 0, recommendations: 0 };
  /** Seconds from each notice the controller heard to the first round at or after it. */
  const noticeToRound: number[] = [];
  const controller = await runControllerSimulation({
    trace,
    scheduler: scheduler(),
    catalog,
    groundTruth,
    spot,
    inspectStore: (store) => {
      const notices = store.listEvents({ kind: 'instance.spot-interruption' });
      events.interruptions = notices.length;
      events.recommendations = store.listEvents({ kind: 'instance.rebalance-recommendation' }).length;
      const rounds = store.listRounds().map((r) => r.atSeconds);
      for (const n of notices)
        noticeToRound.push(Math.min(...rounds.filter((t) => t >= n.atSeconds)) - n.atSeconds);
    },
  });
  return { engine, controller, events, noticeToRound };
}

describe('controller runtime with the spot market open', () => {
  it('eva on the first 20 pai_200 jobs buys spot as the engine does: identical, false alarms drawn alike per launch', async () => {
    // False alarms (a recommendation with no reclaim behind it) drawn per instance, 30 per instance-month: eva moves
    // tasks off the flagged instances in both runtimes, at the same times, since the nth launch is drawn alike.
    const { engine, controller, events } = await both('eva', 20, 0, 0, 30);
    expect(engine.spot?.spotShare).toBeGreaterThan(0.9);
    expect(engine.spot?.rebalanceRecommendations).toBeGreaterThan(0);
    expect(events.recommendations).toBe(engine.spot?.rebalanceRecommendations);
    expect(controller.spot?.spotShare).toBeCloseTo(engine.spot?.spotShare ?? 0, 9);
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 6);
    expect(controller.summary.meanJctHours).toBeCloseTo(engine.summary.meanJctHours, 9);
    expect(controller.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds])).toEqual(
      engine.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds]),
    );
    // Spot prices, not on-demand ones: the same plans on demand cost several times more.
    const onDemand = await runControllerSimulation({
      trace: loadRequestTrace({ trace: { format: 'eva', jobs: 20 } }, catalog),
      scheduler: createScheduler('eva', { catalog, interferenceProfile: groundTruth }),
      catalog,
      groundTruth,
    });
    expect(controller.summary.totalCost).toBeLessThan(0.5 * onDemand.summary.totalCost);
    expect(onDemand.spot).toBeUndefined();
  });

  it('under pool-wide reclaims eva plans at each notice, moves its tasks and loses no work, as the engine does', async () => {
    const { engine, controller, events, noticeToRound } = await both('eva', 20, 60);
    const spot = controller.spot;
    // The controller heard the notices as the interruption queue delivers them, and planned at once each time, though
    // the simulator's rounds otherwise keep the period: capacity about to go is not left to the next one.
    expect(events.interruptions).toBeGreaterThan(0);
    expect(noticeToRound).toHaveLength(events.interruptions);
    expect(Math.max(...noticeToRound)).toBeLessThanOrEqual(1);
    // It drained those instances and moved their tasks off within the two minutes. Those in their first hour it left
    // for EC2 to take (free), the others it ended: EC2 took back some, not all, of those it warned of.
    expect(spot?.interruptions).toBeGreaterThan(0);
    expect(spot?.interruptions).toBeLessThan(events.interruptions);
    // pai_200's tasks checkpoint (kill + upload) in at most 21 s, well within the notice: nothing is lost.
    expect(spot?.lostWorkHours).toBe(0);
    expect(controller.summary.jobs).toBe(20);
    expect(controller.jobs.every((j) => j.jctSeconds !== null && j.jctSeconds > 0)).toBe(true);
    expect(controller.summary.migrationsPerJob).toBeGreaterThan(0);
    // The engine does as the controller does at a notice: it closes the pool to launches for three minutes, leaves the
    // drained instance in its first hour for EC2, and plans again at a reclaim only for the jobs it lost. So the same
    // replacements go to the same pools, the same reclaims land, and every job starts and ends at the same second.
    expect(engine.spot).toEqual(spot);
    expect(controller.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds])).toEqual(
      engine.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds]),
    );
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 6);
    expect(controller.summary.migrationsPerJob).toBe(engine.summary.migrationsPerJob);
  });

  it('prices the work at risk alike: a job that never checkpoints, held to a delay bound, goes on demand in both', async () => {
    // Four hours of work with no checkpoint but the one a stop takes: one interruption would cost all of it, over its
    // hour's bound, so Eva buys it on demand; with a checkpoint every 10 minutes spot passes the bound in both.
    const jobs = (every: number) =>
      withControllerJobIds({
        ...trace(
          ...[0, 600, 1200].map((at, i) => ({
            ...traceJob(`j${i}`, { arrivalSeconds: at, iterations: 14_400, workload: `w${i}` }),
            spotMaxDelaySeconds: 3600,
            checkpointIntervalSeconds: every,
          })),
        ),
      });
    for (const [every, share] of [
      [0, 0],
      [600, 1],
    ] as const) {
      const scheduler = () =>
        createScheduler('eva', { catalog, interferenceProfile: groundTruth, spot: true });
      const spot: SpotSimulation = { seed: 0, noticeHandling: 'checkpoint-and-drain' };
      const t = jobs(every);
      const engine = runSimulation({ trace: t, scheduler: scheduler(), catalog, groundTruth, spot });
      const controller = await runControllerSimulation({
        trace: t,
        scheduler: scheduler(),
        catalog,
        groundTruth,
        spot,
      });
      expect(engine.spot?.spotShare).toBeCloseTo(share, 9);
      expect(controller.spot?.spotShare).toBeCloseTo(share, 9);
    }
  });

  it('skypilot-spot relaunches a reclaimed job in another zone, as the engine does (EAGER_NEXT_REGION)', async () => {
    const trace = loadRequestTrace({ trace: { format: 'eva', jobs: 20 } }, catalog);
    const moves: { lostIn: string; nextZone: string | undefined }[] = [];
    await runControllerSimulation({
      trace,
      scheduler: createScheduler('skypilot-spot', { catalog, interferenceProfile: groundTruth, spot: true }),
      catalog,
      groundTruth,
      spot: { seed: 0, noticeHandling: 'none', burstsPerPoolPerMonth: 60 },
      inspectStore: (store) => {
        for (const lost of store.listEvents({ kind: 'job.capacity-lost' })) {
          const next = store
            .listEvents({ jobId: lost.jobId, kind: 'task.state' })
            .find((e) => e.seq > lost.seq && e.instanceId !== undefined && e.instanceId !== lost.instanceId);
          moves.push({
            lostIn: (lost.data as { zone: string }).zone,
            nextZone:
              next === undefined ? undefined : store.getInstance(next.instanceId as string)?.availabilityZone,
          });
        }
      },
    });
    expect(moves.length).toBeGreaterThan(0);
    for (const m of moves) expect(m.nextZone).toBeDefined();
    for (const m of moves) expect(m.nextZone).not.toBe(m.lostIn);
  });

  it('skypilot-spot ignores the notice: a reclaim loses the work since the last periodic checkpoint', async () => {
    const { engine, controller, events } = await both('skypilot-spot', 20, 60);
    expect(events).toEqual({ interruptions: 0, recommendations: 0 });
    for (const run of [engine, controller]) {
      const spot = run.spot;
      expect(spot?.interruptions).toBeGreaterThan(0);
      expect(spot?.lostWorkHours).toBeGreaterThan(0);
      // One job per instance, checkpointing every 30 minutes: at most one interval lost per reclaim.
      expect(spot?.lostWorkHours).toBeLessThanOrEqual(
        ((spot?.interruptions ?? 0) * CHECKPOINT_SECONDS) / 3600,
      );
      expect(run.summary.jobs).toBe(20);
    }
    // The same reclaims (bursts by pool, lives by launch) of the same instances: the same bill, to the cent.
    expect(controller.spot?.interruptions).toBe(engine.spot?.interruptions);
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 2);
  });

  it('karpenter-spot evicts at each notice, drains and closes the pool, and plans the replacement at once, as the engine does', async () => {
    const { engine, controller, events, noticeToRound } = await both('karpenter-spot', 20, 60, 1);
    // The controller heard every notice and planned at once; recommendations it does not hear (Karpenter ignores them).
    expect(events.interruptions).toBeGreaterThan(0);
    expect(events.recommendations).toBe(0);
    expect(controller.spot?.rebalanceRecommendations).toBeGreaterThan(0);
    expect(noticeToRound).toHaveLength(events.interruptions);
    expect(Math.max(...noticeToRound)).toBeLessThanOrEqual(1);
    // Evicted, its jobs save their progress on the SIGTERM (their checkpoints fit in the notice) and lose no work;
    // EC2 takes back only the drained instances in their first hour, so fewer than it warned of.
    const spot = controller.spot;
    expect(spot?.lostWorkHours).toBe(0);
    expect(spot?.interruptions).toBeLessThan(events.interruptions);
    // The engine evicts, drains and closes alike: the same reclaims and losses, every job at the same seconds.
    expect(engine.spot).toEqual(spot);
    expect(controller.summary.migrationsPerJob).toBe(engine.summary.migrationsPerJob);
    expect(controller.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds])).toEqual(
      engine.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds]),
    );
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 6);
  });

  it('with recommendations on, one precedes every reclaim in both runtimes, and eva still loses no work', async () => {
    const { engine, controller, events } = await both('eva', 20, 60, 1);
    expect(events.recommendations).toBeGreaterThan(0);
    expect(events.recommendations).toBeLessThanOrEqual(controller.spot?.rebalanceRecommendations ?? 0);
    for (const run of [engine, controller]) {
      const spot = run.spot;
      expect(spot?.rebalanceRecommendations).toBeGreaterThan(0);
      expect(spot?.rebalanceRecommendations).toBeGreaterThanOrEqual(spot?.interruptions ?? 0);
      expect(run.summary.jobs).toBe(20);
    }
    expect(controller.spot?.lostWorkHours).toBe(0);
  });

  it("under a $ cap the controller counts spot at its pool's price, as the engine does: the same starts, ends and bill", async () => {
    // At $15/h a p3.8xlarge and a p3.2xlarge fit together at spot prices, not at on-demand ones ($15.30): the
    // controller's launch gate counted on-demand prices and held the second back until the first had terminated.
    // With false alarms: a recommendation once closed its pool to launches for three minutes in the controller, and
    // an instance launched meanwhile paid the next pool's price for its whole life (the same events, a dearer bill).
    const request: RunRequest = {
      scheduler: 'eva',
      trace: { format: 'eva', jobs: 20, jobIds: 'controller' },
      spot: { falseRebalancesPerMonth: 30 },
      queue: { kind: 'fifo', caps: { maxCostPerHour: 15 }, predict: false },
    };
    const engine = executeRun(request);
    const controller = await executeControllerRun({ ...request, runtime: 'controller' });
    expect(engine.spot?.rebalanceRecommendations).toBeGreaterThan(0);
    expect(controller.summary.peakCostPerHour).toBeLessThanOrEqual(15);
    expect(controller.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds])).toEqual(
      engine.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds]),
    );
    expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 6);
  });
});
