import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ClusterSnapshot, SchedJob, SchedTask } from '../../src/core/model.js';
import { diffConfiguration, InvalidPlanError, type Action } from '../../src/scheduler/actions.js';
import type { Configuration } from '../../src/scheduler/types.js';
import { table3Catalog } from '../helpers/catalogs.js';

// Table 3 catalog: a.x [4,16,244] $12, b.x [1,4,61] $3, c.x [0,8,32] $0.8, d.x [0,4,16] $0.4.
const catalog = table3Catalog();

function job(id: string, taskIds: string[], reconfigurable = true): SchedJob {
  return { id, taskIds, reconfigurable, arrivalSeconds: 0, migrationDelaySeconds: 10 };
}
function task(
  id: string,
  jobId: string,
  instanceId?: string,
  demand: [number, number, number] = [0, 2, 4],
): SchedTask {
  return { id, jobId, key: id, demand: { any: demand }, instanceId };
}

/** A on i-1 (c.x), B (two tasks) on i-1 and i-2 (c.x), P pinned on i-3 (d.x, launching), Q queued. */
const snapshot: ClusterSnapshot = {
  nowSeconds: 900,
  jobs: [job('A', ['A/0']), job('B', ['B/0', 'B/1']), job('P', ['P/0'], false), job('Q', ['Q/0'])],
  tasks: [
    task('A/0', 'A', 'i-1'),
    task('B/0', 'B', 'i-1'),
    task('B/1', 'B', 'i-2'),
    task('P/0', 'P', 'i-3'),
    task('Q/0', 'Q'),
  ],
  instances: [
    { id: 'i-1', typeName: 'c.x', state: 'running', taskIds: ['A/0', 'B/0'] },
    { id: 'i-2', typeName: 'c.x', state: 'running', taskIds: ['B/1'] },
    { id: 'i-3', typeName: 'd.x', state: 'launching', taskIds: ['P/0'] },
  ],
};

const unchanged: Configuration = {
  instances: [
    { id: 'i-1', typeName: 'c.x', isNew: false, taskIds: ['A/0', 'B/0'] },
    { id: 'i-2', typeName: 'c.x', isNew: false, taskIds: ['B/1'] },
    { id: 'i-3', typeName: 'd.x', isNew: false, taskIds: ['P/0'] },
  ],
};

function kinds(actions: readonly Action[]): string[] {
  return actions.map((a) => `${a.kind} ${'taskId' in a ? a.taskId : a.instanceId}`);
}

describe('diffConfiguration', () => {
  it('has nothing to do for the current configuration', () => {
    expect(diffConfiguration(snapshot, unchanged, catalog)).toEqual({
      actions: [],
      movedJobIds: [],
      startedJobIds: [],
      queuedJobIds: [],
    });
  });

  it('moves a whole job when one of its tasks moves, and orders stops, launches, starts, terminations', () => {
    // B/1 goes to a new d.x; B/0 stays on i-1 but restarts with its job (gang). i-2 is dropped.
    const planned: Configuration = {
      instances: [
        { id: 'i-1', typeName: 'c.x', isNew: false, taskIds: ['A/0', 'B/0'] },
        { id: 'i-3', typeName: 'd.x', isNew: false, taskIds: ['P/0'] },
        { id: 'new-1', typeName: 'd.x', isNew: true, taskIds: ['B/1'] },
      ],
    };
    const diff = diffConfiguration(snapshot, planned, catalog);
    expect(kinds(diff.actions)).toEqual([
      'checkpoint-stop B/0',
      'checkpoint-stop B/1',
      'launch-instance new-1',
      'start-task B/0',
      'start-task B/1',
      'terminate-instance i-2',
    ]);
    expect(diff.actions[0]).toMatchObject({ jobId: 'B', instanceId: 'i-1', then: 'move' });
    expect(diff.actions[3]).toEqual({
      kind: 'start-task',
      jobId: 'B',
      taskId: 'B/0',
      instanceId: 'i-1',
      instanceIsNew: false,
      afterStopOf: ['B/0', 'B/1'],
      capacityFrom: [], // its own job's capacity is covered by afterStopOf
    });
    expect(diff.actions[4]).toMatchObject({ instanceId: 'new-1', instanceIsNew: true });
    expect(diff.actions[5]).toEqual({ kind: 'terminate-instance', instanceId: 'i-2', afterEmptyOf: ['B/1'] });
    expect(diff).toMatchObject({ movedJobIds: ['B'], startedJobIds: [], queuedJobIds: [] });
  });

  it('starts queued jobs, notes the capacity a start may wait for, and requeues jobs the plan leaves out', () => {
    // A leaves (back to the queue); Q takes its place on i-1.
    const planned: Configuration = {
      instances: [
        { id: 'i-1', typeName: 'c.x', isNew: false, taskIds: ['B/0', 'Q/0'] },
        { id: 'i-2', typeName: 'c.x', isNew: false, taskIds: ['B/1'] },
        { id: 'i-3', typeName: 'd.x', isNew: false, taskIds: ['P/0'] },
      ],
    };
    const diff = diffConfiguration(snapshot, planned, catalog);
    expect(diff.actions).toEqual([
      { kind: 'checkpoint-stop', jobId: 'A', taskId: 'A/0', instanceId: 'i-1', then: 'queue' },
      {
        kind: 'start-task',
        jobId: 'Q',
        taskId: 'Q/0',
        instanceId: 'i-1',
        instanceIsNew: false,
        afterStopOf: [],
        capacityFrom: ['A/0'],
      },
    ]);
    expect(diff).toMatchObject({ movedJobIds: [], startedJobIds: ['Q'], queuedJobIds: ['A'] });
  });

  it('keeps a pinned job the plan leaves out where it is, with its instance', () => {
    const planned: Configuration = { instances: unchanged.instances.filter((i) => i.id !== 'i-3') };
    expect(diffConfiguration(snapshot, planned, catalog).actions).toEqual([]);
  });

  it('rejects an impossible plan, listing every problem', () => {
    const planned: Configuration = {
      instances: [
        { id: 'i-1', typeName: 'd.x', isNew: false, taskIds: ['A/0', 'B/0', 'A/0'] }, // wrong type, A/0 twice, overfull
        { id: 'i-2', typeName: 'c.x', isNew: true, taskIds: ['ghost'] }, // exists but "new"; unknown task
        { id: 'i-9', typeName: 'c.x', isNew: false, taskIds: ['P/0'] }, // unknown instance; moves a pinned job
        { id: 'new-1', typeName: 'z.x', isNew: true, taskIds: [] }, // unknown type
      ],
    };
    let error: unknown;
    try {
      diffConfiguration(snapshot, planned, catalog, { scheduler: 'buggy' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidPlanError);
    const problems = (error as InvalidPlanError).problems.join('\n');
    expect((error as Error).message).toMatch(/^invalid plan from buggy/);
    for (const expected of [
      'instance i-1: planned as d.x but it is a c.x',
      'task A/0: planned on both i-1 and i-1',
      'instance i-2: marked new but it exists',
      'instance i-2: unknown task ghost',
      'instance i-9: not an existing instance and not marked new',
      'task P/0: job P is being launched or migrated and cannot move (to i-9)',
      'instance new-1: unknown instance type z.x',
      'job B: the plan places 1 of its 2 tasks',
    ])
      expect(problems).toContain(expected);
  });

  it('rejects an instance whose tasks exceed its capacity', () => {
    const big = {
      ...snapshot,
      tasks: snapshot.tasks.map((t) => (t.id === 'Q/0' ? task('Q/0', 'Q', undefined, [0, 7, 4]) : t)),
    };
    const planned: Configuration = {
      instances: [
        ...unchanged.instances.map((i) => (i.id === 'i-2' ? { ...i, taskIds: ['B/1', 'Q/0'] } : i)),
      ],
    };
    expect(() => diffConfiguration(big, planned, catalog)).toThrow(
      /instance i-2 \(c\.x\): tasks need \[0 GPU, 9 vCPU, 8 GiB\], capacity is \[0 GPU, 8 vCPU, 32 GiB\]/,
    );
  });
});

describe('diffConfiguration (property)', () => {
  const roomy = {
    provider: 'test',
    region: 'test',
    types: [{ ...table3Catalog().types[0]!, name: 'a.x', capacity: [99, 999, 9999] as const }],
  };

  it('carrying out the actions turns the current placement into the planned one', () => {
    const arb = fc
      .record({
        jobs: fc.array(
          fc.record({
            tasks: fc.integer({ min: 1, max: 3 }),
            pinned: fc.boolean(),
            now: fc.integer({ min: -1, max: 3 }),
            later: fc.integer({ min: -1, max: 5 }),
          }),
          { minLength: 1, maxLength: 8 },
        ),
      })
      .map(({ jobs }) => jobs.map((j, n) => ({ ...j, id: `j${n}` })));
    fc.assert(
      fc.property(arb, (jobs) => {
        // Existing instances i-0..i-3; planned: existing i-0..i-3 or new-4/new-5; -1 = unplaced.
        const where = (k: number): string | undefined => (k < 0 ? undefined : k <= 3 ? `i-${k}` : `new-${k}`);
        const tasks: SchedTask[] = [];
        const plannedOf = new Map<string, string>();
        for (const j of jobs)
          for (let k = 0; k < j.tasks; k++) {
            const id = `${j.id}/${k}`;
            const now = where(j.pinned && j.now < 0 ? 0 : j.now);
            tasks.push(task(id, j.id, now));
            const later = j.pinned ? now : where(j.later);
            if (later !== undefined) plannedOf.set(id, later);
          }
        const snap: ClusterSnapshot = {
          nowSeconds: 0,
          jobs: jobs.map((j) =>
            job(
              j.id,
              Array.from({ length: j.tasks }, (_, k) => `${j.id}/${k}`),
              !j.pinned,
            ),
          ),
          tasks,
          instances: [0, 1, 2, 3].map((k) => ({
            id: `i-${k}`,
            typeName: 'a.x',
            state: 'running' as const,
            taskIds: tasks.filter((t) => t.instanceId === `i-${k}`).map((t) => t.id),
          })),
        };
        const ids = [...new Set(plannedOf.values())];
        const planned: Configuration = {
          instances: ids.map((id) => ({
            id,
            typeName: 'a.x',
            isNew: id.startsWith('new-'),
            taskIds: [...plannedOf].filter(([, i]) => i === id).map(([t]) => t),
          })),
        };
        const diff = diffConfiguration(snap, planned, roomy);
        const placement = new Map(
          tasks.flatMap((t) => (t.instanceId === undefined ? [] : [[t.id, t.instanceId] as const])),
        );
        const terminated = new Set<string>();
        const launched = new Set<string>();
        for (const a of diff.actions) {
          if (a.kind === 'checkpoint-stop') placement.delete(a.taskId);
          else if (a.kind === 'start-task') placement.set(a.taskId, a.instanceId);
          else if (a.kind === 'launch-instance') launched.add(a.instanceId);
          else terminated.add(a.instanceId);
        }
        expect(new Map([...placement].sort())).toEqual(new Map([...plannedOf].sort()));
        expect(launched).toEqual(new Set(ids.filter((i) => i.startsWith('new-'))));
        expect(terminated).toEqual(new Set(['i-0', 'i-1', 'i-2', 'i-3'].filter((i) => !ids.includes(i))));
        // Each moved job is stopped entirely before any of its starts, and counted once.
        expect(new Set(diff.movedJobIds).size).toBe(diff.movedJobIds.length);
      }),
      { numRuns: 200 },
    );
  });
});
