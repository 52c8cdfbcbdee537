import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../src/core/model.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
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
  eva.importState({ ...state, history: { times: [], fullCount: 1 } });
  return eva;
}

function eventTimes(eva: EvaScheduler): number[] {
  return eva.exportState().history.times;
}

describe("Eva's event history: a job counts once when it arrives and once when it ends", () => {
  it('does not count a job hidden and shown again over several rounds: two events, T = 100 s / ln 2', () => {
    const eva = evaWithOneFull();
    const live = { liveJobIds: ['A', 'B'] };
    eva.plan({ ...round(300, true), instances: [], tasks: [task('A'), task('B')] }, live);
    let plan: Plan | undefined;
    for (let r = 2; r <= 7; r++) plan = eva.plan(round(r * 300, r % 2 === 1), live);
    expect(eventTimes(eva)).toEqual([0, 100]);
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
    expect(eventTimes(eva)).toEqual([0, 100]);
    // B ended while out of the snapshot: one completion, now.
    eva.plan(round(900, false), { liveJobIds: ['A'] });
    expect(eventTimes(eva)).toEqual([0, 100, 900]);
    eva.plan(round(1200, false), { liveJobIds: ['A'] });
    expect(eventTimes(eva)).toEqual([0, 100, 900]);
    // Its id is dropped once it ended: what is kept stays bounded by the live jobs.
    expect(eva.exportState().knownJobs).toEqual(['A']);
  });

  it('takes a job missing from the snapshot as ended when the runtime does not say which jobs are live', () => {
    const eva = new EvaScheduler(catalog);
    eva.plan(round(300, true));
    eva.plan(round(600, false));
    expect(eventTimes(eva)).toEqual([0, 100, 600]);
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
      expect(eventTimes(s)).toEqual([0, 100]);
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
    expect(eventTimes(eva)).toEqual([0, 100, 100, 600]);
    expect(new Set(eva.exportState().knownJobs)).toEqual(new Set(['A', 'B']));
  });
});
