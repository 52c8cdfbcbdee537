import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../src/core/model.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { JobEvents } from '../../src/scheduler/eva-events.js';
import type { Plan } from '../../src/scheduler/types.js';

/**
 * Eva's horizon T = −1 / (λ · ln(1 − p)) rests on the rate λ of job arrivals and completions (§4.5). A job out of one
 * round's snapshot and back in the next (admission held it, a preemption sent it back, the runtime left it out) has
 * neither arrived again nor finished.
 */
const catalog = loadCatalogFile();

const ARRIVALS: Readonly<Record<string, number>> = { A: 0, B: 100 };

function job(id: string, running: boolean): SchedJob {
  return {
    id,
    taskIds: [`${id}-t`],
    reconfigurable: true,
    arrivalSeconds: ARRIVALS[id] ?? 0,
    migrationDelaySeconds: 60,
    expectedRemainingSeconds: 36_000,
    ...(running ? { runningSinceSeconds: 400 } : {}),
  };
}

function task(id: string, instanceId?: string): SchedTask {
  return { id: `${id}-t`, jobId: id, key: id, demand: { any: [0, 4, 8] }, instanceId };
}

/** A running on its instance since the first round; B shown (waiting) or not. */
function round(nowSeconds: number, withB: boolean): ClusterSnapshot {
  return {
    nowSeconds,
    jobs: withB ? [job('A', true), job('B', false)] : [job('A', true)],
    tasks: withB ? [task('A', 'i-a'), task('B')] : [task('A', 'i-a')],
    instances: [{ id: 'i-a', typeName: 'c7i.xlarge', state: 'running', taskIds: ['A-t'] }],
  };
}

/** An Eva whose history says one round of the past chose a Full Reconfiguration (p > 0: T follows λ). */
function evaWithOneFull(): EvaScheduler {
  const eva = new EvaScheduler(catalog);
  const state = eva.exportState();
  eva.importState({ ...state, history: { count: 0, fullCount: 1 } });
  return eva;
}

/** What the history keeps of the events counted: how many, the earliest and the latest time. */
function counted(eva: EvaScheduler): { count: number; first?: number; last?: number } {
  const h = eva.exportState().history;
  return { count: h.count, ...(h.count > 0 ? { first: h.firstSeconds, last: h.lastSeconds } : {}) };
}

/** The summary of these event times. */
function events(...times: number[]): { count: number; first?: number; last?: number } {
  return times.length === 0
    ? { count: 0 }
    : { count: times.length, first: Math.min(...times), last: Math.max(...times) };
}

describe("Eva's event history: a job counts once when it arrives and once when it ends", () => {
  it('does not count a job hidden and shown again over several rounds: two events, T = 100 s / ln 2', () => {
    const eva = evaWithOneFull();
    const live = { liveJobIds: ['A', 'B'] };
    eva.plan({ ...round(300, true), instances: [], tasks: [task('A'), task('B')] }, live);
    let plan: Plan | undefined;
    for (let r = 2; r <= 7; r++) plan = eva.plan(round(r * 300, r % 2 === 1), live);
    expect(counted(eva)).toEqual(events(0, 100));
    expect(eva.exportState().history.fullCount).toBe(1);
    // λ = 1 event / 100 s, p = 1 full / 2 events: T = −1 / (0.01 · ln 0.5) = 100 / ln 2 ≈ 144 s.
    expect(plan?.decision.eventRatePerSecond).toBeCloseTo(0.01, 12);
    expect(plan?.decision.fullFraction).toBe(0.5);
    expect(plan?.decision.horizonSeconds).toBeCloseTo(100 / Math.LN2, 9);
  });

  it('counts a real completion once, when the runtime no longer has the job, at that round', () => {
    const eva = evaWithOneFull();
    eva.plan(round(300, true), { liveJobIds: ['A', 'B'] });
    eva.plan(round(600, false), { liveJobIds: ['A', 'B'] });
    expect(counted(eva)).toEqual(events(0, 100));
    // B ended while out of the snapshot: one completion, now.
    eva.plan(round(900, false), { liveJobIds: ['A'] });
    expect(counted(eva)).toEqual(events(0, 100, 900));
    eva.plan(round(1200, false), { liveJobIds: ['A'] });
    expect(counted(eva)).toEqual(events(0, 100, 900));
    // Its id is dropped once it ended: what is kept stays bounded by the live jobs.
    expect(eva.exportState().knownJobs).toEqual(['A']);
  });

  it('takes a job missing from the snapshot as ended when the runtime does not say which jobs are live', () => {
    const eva = new EvaScheduler(catalog);
    eva.plan(round(300, true));
    eva.plan(round(600, false));
    expect(counted(eva)).toEqual(events(0, 100, 600));
    expect(eva.exportState().knownJobs).toEqual(['A']);
  });

  it('keeps what it counted across a fork and an export, so a restarted controller counts no arrival twice', () => {
    const eva = evaWithOneFull();
    eva.plan(round(300, true), { liveJobIds: ['A', 'B'] });
    const restored = new EvaScheduler(catalog);
    restored.importState(
      JSON.parse(JSON.stringify(eva.exportState())) as ReturnType<EvaScheduler['exportState']>,
    );
    const fork = eva.fork();
    for (const s of [restored, fork]) {
      s.plan(round(600, false), { liveJobIds: ['A', 'B'] });
      s.plan(round(900, true), { liveJobIds: ['A', 'B'] });
      expect(counted(s)).toEqual(events(0, 100));
    }
  });

  it('loads a state saved before endings were told apart (knownJobs: the last snapshot) and goes on from it', () => {
    const fresh = new EvaScheduler(catalog).exportState();
    // As the previous version saved it after B had been out of a round: A's and B's arrivals, B's fake completion.
    const saved = {
      table: fresh.table,
      history: { times: [0, 100, 600], fullCount: 1 },
      knownJobs: ['A'],
    };
    const eva = new EvaScheduler(catalog);
    eva.importState(JSON.parse(JSON.stringify(saved)) as ReturnType<EvaScheduler['exportState']>);
    expect(eva.exportState().knownJobs).toEqual(['A']);
    // B back: its arrival once more (its departure was already counted), then no more for its flips.
    eva.plan(round(900, true), { liveJobIds: ['A', 'B'] });
    eva.plan(round(1200, false), { liveJobIds: ['A', 'B'] });
    eva.plan(round(1500, true), { liveJobIds: ['A', 'B'] });
    expect(counted(eva)).toEqual(events(0, 100, 100, 600));
    expect(new Set(eva.exportState().knownJobs)).toEqual(new Set(['A', 'B']));
  });

  it('plans from a history saved as every event time exactly as from its compact form', () => {
    const table = new EvaScheduler(catalog).exportState().table;
    // A, B and a job since ended arrived; one round chose a Full Reconfiguration. B is out of the snapshot.
    const older = { table, history: { times: [0, 100, 100, 600], fullCount: 1 }, knownJobs: ['A'] };
    const compact = {
      table,
      history: { count: 4, fullCount: 1, firstSeconds: 0, lastSeconds: 600 },
      knownJobs: ['A'],
    };
    const decisions = [older, compact].map((saved) => {
      const eva = new EvaScheduler(catalog);
      eva.importState(JSON.parse(JSON.stringify(saved)) as ReturnType<EvaScheduler['exportState']>);
      expect(eva.exportState().history).toEqual(compact.history);
      const { eventRatePerSecond, fullFraction, horizonSeconds } = eva.plan(round(900, true), {
        liveJobIds: ['A', 'B'],
      }).decision;
      return { eventRatePerSecond, fullFraction, horizonSeconds };
    });
    expect(decisions[0]).toEqual(decisions[1]);
    // B's arrival at 100 makes five events over 600 s: λ = 4 / 600 s, p = 1/5, T = −1 / (λ · ln 0.8).
    expect(decisions[0]).toEqual({
      eventRatePerSecond: 4 / 600,
      fullFraction: 0.2,
      horizonSeconds: -1 / ((4 / 600) * Math.log(0.8)),
    });
  });

  it('keeps its state whole when a saved state is unreadable in one part: nothing of it is taken', () => {
    const eva = evaWithOneFull();
    eva.plan(round(100, true), { liveJobIds: ['A', 'B'] });
    const before = JSON.stringify(eva.exportState());
    // A readable table, unlike its own, beside a history no version wrote.
    const table = {
      ...eva.exportState().table,
      entries: [{ target: 'A', others: ['B'], mean: 0.5, count: 3 }],
    };
    const bad = { ...eva.exportState(), table, history: { count: -1, fullCount: 0 } };
    expect(() => eva.importState(bad)).toThrow();
    expect(JSON.stringify(eva.exportState())).toBe(before);
  });

  it('saves the same few numbers after a thousand jobs and after five thousand: the state does not grow', () => {
    const saved = (jobs: number): string => {
      const events = JobEvents.empty();
      const arrived = Array.from({ length: jobs }, (_, i) => ({
        ...job(`j${i}`, false),
        arrivalSeconds: i % 300,
      }));
      events.track({ nowSeconds: 300, jobs: arrived, tasks: [], instances: [] }, undefined);
      // All of them end.
      events.track({ nowSeconds: 900, jobs: [], tasks: [], instances: [] }, []);
      return JSON.stringify(events.toJSON());
    };
    expect(JSON.parse(saved(1000))).toEqual({
      history: { count: 2000, fullCount: 0, firstSeconds: 0, lastSeconds: 900 },
      knownJobs: [],
    });
    // 2,000 and 9,998 events: the same digits, so the same length.
    expect(saved(4999).length).toBe(saved(1000).length);
  });
});
