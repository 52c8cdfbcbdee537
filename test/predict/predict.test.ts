import { describe, expect, it } from 'vitest';
import { Admission } from '../../src/queue/admission.js';
import { NoPackingScheduler } from '../../src/scheduler/baselines/no-packing.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import { singleClassConfig } from '../../src/queue/wfq.js';
import { predictCompletions } from '../../src/predict/predict.js';
import type { SimWorld } from '../../src/world/world.js';
import { testCatalog, traceJob } from '../sim/sim-fixtures.js';

/**
 * The controller's entry point: a world built from plain data (what the controller knows) run forward.
 * small.x: instantiate 10 + worker start 20 + register 30 s; a task starts in fetch 2 + build 3 s; init 7 s.
 */
const catalog = testCatalog();
const NOW = 3_000;

function world(extra: Partial<SimWorld> = {}): SimWorld {
  return {
    nowSeconds: NOW,
    jobs: [
      {
        // 3,000 iterations at 2/s, 2,000 done: 500 s to go, alone on i-1.
        spec: traceJob('running', { iterations: 3000, fullThroughput: 2 }),
        status: 'executing',
        active: true,
        activeSinceSeconds: 100,
        completedIterations: 2000,
        startSeconds: 100,
        migrations: 0,
        tasks: [{ name: 'node0', state: 'running', committedInstanceId: 'i-1', occupyingInstanceId: 'i-1' }],
      },
      {
        spec: traceJob('queued', { arrivalSeconds: 2_900, iterations: 1000 }),
        status: 'queued',
        active: false,
        completedIterations: 0,
        startSeconds: null,
        migrations: 0,
        tasks: [{ name: 'node0', state: 'queued' }],
      },
    ],
    instances: [
      { id: 'i-1', typeName: 'small.x', lifecycle: 'running', assignable: true, images: ['img-a'] },
    ],
    events: [{ kind: 'round', timeSeconds: NOW }],
    ...extra,
  };
}

describe('predictCompletions (controller worlds)', () => {
  it('hand-checked: a running job finishes its remaining work; a queued job waits for a new instance', () => {
    const p = predictCompletions({ world: world(), scheduler: new NoPackingScheduler(catalog), catalog });
    expect(p.get('running')).toEqual({ startSeconds: 100, endSeconds: NOW + 500 });
    // Round at NOW launches a small.x: up at +60, task launched at +65, active after init at +72, 1,000 s of work.
    expect(p.get('queued')).toEqual({ startSeconds: NOW + 72, endSeconds: NOW + 72 + 1000 });
  });

  it('hand-checked: a held job starts once the job it waits for ends; one whose dependencies are gone is queued', () => {
    const held = (id: string, dependsOn: string[]): SimWorld['jobs'][number] => ({
      spec: { ...traceJob(id, { arrivalSeconds: 2_950, iterations: 100 }), dependsOn },
      status: 'held',
      active: false,
      completedIterations: 0,
      startSeconds: null,
      migrations: 0,
      tasks: [{ name: 'node0', state: 'queued' }],
    });
    const base = world();
    const p = predictCompletions({
      world: { ...base, jobs: [...base.jobs, held('next', ['running']), held('orphan', ['gone'])] },
      scheduler: new NoPackingScheduler(catalog),
      catalog,
    });
    // `running` ends at NOW + 500; No-Packing launches for `next` at the next 300 s round (NOW + 600): +72, 100 s.
    expect(p.get('next')).toEqual({ startSeconds: NOW + 600 + 72, endSeconds: NOW + 600 + 72 + 100 });
    // Nothing it waits for is in the world (it has ended): it is planned at once, with `queued`.
    expect(p.get('orphan')).toEqual({ startSeconds: NOW + 72, endSeconds: NOW + 72 + 100 });
  });

  it('under an instance cap, the queued job waits for the running one (fifo admission, same rules as the simulator)', () => {
    const p = predictCompletions({
      world: world(),
      scheduler: new NoPackingScheduler(catalog),
      catalog,
      admission: new Admission(catalog, { caps: { maxInstances: 1 }, config: singleClassConfig('fifo') }),
    });
    const running = p.get('running')?.endSeconds ?? 0;
    const queued = p.get('queued');
    expect(running).toBe(NOW + 500);
    // Admitted at the first round after NOW + 500 (NOW + 600). No-Packing replaces i-1 by a fresh small.x, which
    // may launch only once i-1 has terminated (5 s; the cap counts it until then): + 60 s up, + 5 s start, + 7 s init.
    const start = NOW + 600 + 5 + 60 + 5 + 7;
    expect(queued?.startSeconds).toBe(start);
    expect(queued?.endSeconds).toBe(start + 1000);
  });

  it('uses the scheduler’s learned rates: Eva’s prior for co-located tasks slows both jobs', () => {
    const eva = new EvaScheduler(catalog, { defaultRate: 0.8 });
    const w = world({
      jobs: world().jobs.map((j) => ({
        ...j,
        spec: {
          ...j.spec,
          tasks: j.spec.tasks.map((t) => ({ ...t, demand: { any: [0, 2, 8] as [number, number, number] } })),
        },
      })),
    });
    const p = predictCompletions({ world: w, scheduler: eva, catalog });
    const alone = predictCompletions({ world: w, scheduler: eva.fork(), catalog, rate: () => 1 });
    expect(p.get('queued')?.endSeconds ?? 0).toBeGreaterThan(alone.get('queued')?.endSeconds ?? Infinity);
  });

  it('rejects a world that refers to an unknown instance', () => {
    const bad = world({ instances: [] });
    expect(() =>
      predictCompletions({ world: bad, scheduler: new NoPackingScheduler(catalog), catalog }),
    ).toThrow(/unknown instance i-1/);
  });
});
