import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/core/catalog.js';
import { SpotBaseline } from '../../src/scheduler/baselines/spot-baseline.js';
import { runControllerSimulation } from '../../src/sim/controller-runtime/run-controller.js';
import { noticeHandlingOf } from '../../src/sim/run-request.js';
import { runSimulation } from '../../src/sim/run-simulation.js';
import { withControllerJobIds } from '../../src/sim/traces/controller-job-ids.js';
import { constantPairwise } from '../../src/world/ground-truth.js';
import type { Trace } from '../../src/world/trace.js';
import { burstEvents, type SpotSimulation } from '../../src/world/spot-world.js';
import { EventLog, testCatalog, testSpotMarket, trace, traceJob, traceTask } from './sim-fixtures.js';

/**
 * karpenter-spot on EC2's two-minute notice, as Karpenter's interruption controller meets it (digest
 * industry-anchors §1.4): the node is drained and its pods evicted at once, the offering is marked unavailable and a
 * replacement is provisioned in parallel. The eviction is a SIGTERM, and karpenter-spot stands for jobs that checkpoint
 * on it (as its consolidation moves them): a job whose kill and upload fit in the notice restarts from the progress
 * it had at the notice, losing nothing, as fleetwise's worker saves it; one whose checkpoint does not fit restarts
 * from its last periodic checkpoint, so the work lost runs to the notice, not to the reclaim two minutes later.
 * skypilot-spot hears nothing and loses the work up to the reclaim.
 *
 * One 20,000 s job (one iteration a second, a periodic checkpoint every 1,800 s of work) on small.x, whose spot pools
 * are testa ($1.08/h) and testb ($1.44/h), both <5%: price-capacity-optimized, testa. Seed 101 at 60 bursts per pool
 * per 30 days empties testa first at T ≈ 2,409.03 s (its notice then, its reclaim at T + 120) and testb only long after
 * the job ends; a <5% instance's own reclaim lies years away.
 */

function catalog(): Catalog {
  return {
    ...testCatalog(),
    spot: testSpotMarket(
      { typeName: 'small.x', zone: 'testa', pricePerHour: 1.08, interruption: '<5%' },
      { typeName: 'small.x', zone: 'testb', pricePerHour: 1.44, interruption: '<5%' },
    ),
  };
}

const SPOT: SpotSimulation = {
  seed: 101,
  burstsPerPoolPerMonth: 60,
  noticeHandling: noticeHandlingOf('karpenter-spot'),
};
/** Its checkpoint is killed in 1 s and uploaded in 4 s (the fixture's task): it fits in the notice. */
const JOB = trace(traceJob('J', { iterations: 20_000 }));
/** The same job whose checkpoint takes 1 + 200 s to kill and upload: longer than the notice. */
const SLOW_SAVE_JOB = trace(
  traceJob('J', { iterations: 20_000, tasks: [traceTask('node0', { uploadDelaySeconds: 200 })] }),
);
const CHECKPOINT_SECONDS = 1800;
/** Up at 60 s (launch 10 + worker 20 + register 30), the task at 65 s (fetch 2 + build 3), working at 72 s (init 7). */
const STARTUP_SECONDS = 72;

/** karpenter-spot's run of `jobs` (the engine's options; the controller runtime takes them too). */
function run(jobs: Trace) {
  return {
    trace: jobs,
    scheduler: new SpotBaseline(catalog(), 'karpenter-spot'),
    catalog: catalog(),
    groundTruth: constantPairwise(1),
    checkpointIntervalSeconds: CHECKPOINT_SECONDS,
    spot: SPOT,
  };
}

/** When the burst empties testa: the notice, two minutes before the reclaim. */
function noticeSeconds(): number {
  const testa = catalog().spot?.offerings[0];
  if (testa === undefined) throw new Error('the catalog has no testa pool');
  return burstEvents(SPOT, testa, 0, 0).burstAt;
}

describe('karpenter-spot on a spot interruption notice (drain-and-evict)', () => {
  it('is how the run request sets karpenter-spot up; skypilot-spot hears nothing, eva checkpoints and drains', () => {
    expect(noticeHandlingOf('karpenter-spot')).toBe('drain-and-evict');
    expect(noticeHandlingOf('skypilot-spot')).toBe('none');
    expect(noticeHandlingOf('eva')).toBe('checkpoint-and-drain');
  });

  it('engine: evicts the job at the notice, saving its progress on the SIGTERM, and replaces it in the next pool', () => {
    const t = noticeSeconds();
    // The hand check rests on these: testa's burst between the first and second checkpoints, in i-1's first hour.
    expect(t).toBeCloseTo(2409.027, 3);
    expect(t).toBeGreaterThan(STARTUP_SECONDS + CHECKPOINT_SECONDS);
    expect(t + 120).toBeLessThan(3600);
    const log = new EventLog();
    const result = runSimulation({ ...run(JOB), onEvent: log.record });
    // Killed and uploaded in 5 s, its checkpoint fits in the notice: it keeps every second of work it did on i-1, as
    // a job that checkpoints on SIGTERM does, and as a karpenter-spot consolidation move keeps it.
    expect(result.spot?.lostWorkHours).toBe(0);
    expect(result.summary.migrationsPerJob).toBe(0);
    // The replacement is asked for at the notice (the round it asks for), not at the reclaim: i-2 launches at T, the
    // job starts on it when it registers, and works again 72 s after T.
    expect(log.time('instance-launch', { instanceId: 'i-2' })).toBe(t);
    expect(log.time('start-issued', { jobId: 'J', instanceId: 'i-2' })).toBe(t + 60);
    expect(log.times('job-active', { jobId: 'J' })).toEqual([STARTUP_SECONDS, t + STARTUP_SECONDS]);
    // 20,000 s of work done once, two startups; the end is rounded up to the second.
    const end = result.jobs[0]?.endSeconds ?? Number.NaN;
    expect(end).toBe(Math.ceil(20_000 + 2 * STARTUP_SECONDS));
    // i-1 is drained: nothing more goes on it, and empty in its first hour, it is left for EC2, which takes it at
    // T + 120 (an interruption, billed nothing). testa is closed for three minutes after the notice, so i-2 is bought
    // in testb: the whole bill is i-2's, at testb's $1.44/h, from its instantiation at T + 10 to its end (the job's
    // end, the next 300 s round, then 5 s to terminate).
    expect(log.times('start-issued', { instanceId: 'i-1' })).toHaveLength(1);
    expect(log.times('terminate-issued', { instanceId: 'i-1' })).toEqual([]);
    expect(log.time('terminated', { instanceId: 'i-1' })).toBe(t + 120);
    expect(result.spot?.interruptions).toBe(1);
    const billedSeconds = log.time('terminated', { instanceId: 'i-2' }) - (t + 10);
    expect(log.time('terminated', { instanceId: 'i-2' })).toBe(Math.ceil(end / 300) * 300 + 5);
    expect(result.summary.totalCost).toBeCloseTo((billedSeconds * 1.44) / 3600, 9);
  });

  it('engine: a job whose checkpoint does not fit in the notice goes back to its last periodic checkpoint', () => {
    const t = noticeSeconds();
    const log = new EventLog();
    const result = runSimulation({ ...run(SLOW_SAVE_JOB), onEvent: log.record });
    // 201 s to kill and upload, more than the notice's 120 s: its last periodic checkpoint was at 72 + 1,800 s of
    // work, and it loses the work from there to the notice (537 s), not to the reclaim (657 s).
    const lost = t - STARTUP_SECONDS - CHECKPOINT_SECONDS;
    expect(lost).toBeCloseTo(537.027, 3);
    expect((result.spot?.lostWorkHours ?? 0) * 3600).toBeCloseTo(lost, 6);
    expect(result.summary.migrationsPerJob).toBe(0);
    expect(log.time('instance-launch', { instanceId: 'i-2' })).toBe(t);
    expect(log.times('job-active', { jobId: 'J' })).toEqual([STARTUP_SECONDS, t + STARTUP_SECONDS]);
    // 20,000 s of work, 537 s of it twice, two startups; the end is rounded up to the second.
    expect(result.jobs[0]?.endSeconds).toBe(Math.ceil(20_000 + lost + 2 * STARTUP_SECONDS));
    expect(log.time('terminated', { instanceId: 'i-1' })).toBe(t + 120);
    expect(log.time('terminated', { instanceId: 'i-2' })).toBe(20_700 + 5);
  });

  it('skypilot-spot stays as it was: it hears no notice, and a reclaim takes the work since its last checkpoint', () => {
    const t = noticeSeconds();
    const result = runSimulation({
      ...run(JOB),
      scheduler: new SpotBaseline(catalog(), 'skypilot-spot'),
      spot: { ...SPOT, noticeHandling: noticeHandlingOf('skypilot-spot') },
    });
    // The job works on i-1 until EC2 takes it at T + 120 and goes back to its periodic checkpoint at 72 + 1,800 s of
    // work, though its checkpoint would have fitted in the notice.
    expect((result.spot?.lostWorkHours ?? 0) * 3600).toBeCloseTo(
      t + 120 - STARTUP_SECONDS - CHECKPOINT_SECONDS,
      6,
    );
    expect(result.spot?.interruptions).toBe(1);
  });

  it('controller runtime: the same eviction, saved progress, replacement, pool and bill as the engine', async () => {
    const t = noticeSeconds();
    for (const [job, lost] of [
      [JOB, 0],
      [SLOW_SAVE_JOB, t - STARTUP_SECONDS - CHECKPOINT_SECONDS],
    ] as const) {
      const named = run(withControllerJobIds(job));
      const engine = runSimulation(run(withControllerJobIds(job)));
      const seen = { notices: [] as number[], drained: [] as string[], zones: [] as (string | undefined)[] };
      const controller = await runControllerSimulation({
        ...named,
        inspectStore: (store) => {
          const notices = store.listEvents({ kind: 'instance.spot-interruption' });
          seen.notices = notices.map((e) => e.atSeconds);
          seen.drained = store
            .listEvents({ kind: 'instance.state' })
            .filter((e) => (e.data as { to?: string } | undefined)?.to === 'draining')
            .map((e) => `${store.getInstance(e.instanceId ?? '')?.availabilityZone ?? '?'}@${e.atSeconds}`);
          seen.zones = store
            .listInstances()
            .sort((a, b) => a.id.localeCompare(b.id))
            .map((i) => i.availabilityZone);
        },
      });
      // The controller heard the notice at T (the interruption queue), drained the instance then (the other drain is
      // the replacement's, once the job has ended) and bought the replacement in testb, testa being closed.
      expect(seen.notices).toEqual([t]);
      expect(seen.drained[0]).toBe(`testa@${t}`);
      expect(seen.zones).toEqual(['testa', 'testb']);
      // The workers evicted the task at the notice, saving its progress when its checkpoint fits: the same work lost
      // as the engine, none or up to the notice.
      expect((controller.spot?.lostWorkHours ?? 0) * 3600).toBeCloseTo(lost, 6);
      expect(controller.spot).toEqual(engine.spot);
      expect(controller.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds])).toEqual(
        engine.jobs.map((j) => [j.id, j.startSeconds, j.endSeconds]),
      );
      expect(controller.summary.totalCost).toBeCloseTo(engine.summary.totalCost, 6);
    }
  });
});
