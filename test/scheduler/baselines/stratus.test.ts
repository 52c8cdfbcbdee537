import { describe, expect, it } from 'vitest';
import { StratusScheduler } from '../../../src/scheduler/baselines/stratus.js';
import { catalog, layout, snapshot, taskId } from './fixtures.js';

const stratus = () => new StratusScheduler(catalog);

describe('StratusScheduler packing', () => {
  // Bins: floor(log2(3600)) = floor(log2(2100)) = floor(log2(3000)) = 11; floor(log2(100000)) = 16.
  const fleet = [
    { id: 'i1', type: 'c7i.xlarge' },
    { id: 'i2', type: 'c7i.2xlarge' },
    { id: 'i3', type: 'c7i.xlarge' },
  ];
  const running = [
    { id: 'a', demand: [0, 2, 4] as const, on: 'i1', remainingSeconds: 3600 },
    { id: 'b', demand: [0, 4, 8] as const, on: 'i2', remainingSeconds: 100_000 },
    { id: 'c', demand: [0, 2, 4] as const, on: 'i3', remainingSeconds: 2100 },
  ];

  it('prefers an instance of the same runtime bin, the one whose remaining time is closest', () => {
    const snap = snapshot({
      instances: fleet,
      jobs: [...running, { id: 'n', demand: [0, 2, 4], remainingSeconds: 3000 }],
    });
    const plan = stratus().plan(snap);
    // i1 (|3600−3000| = 600) beats i3 (900) in bin 11, and both beat up-packing into i2 (bin 16, more room).
    expect(layout(plan.configuration)).toEqual([
      'i1:c7i.xlarge[a-0,n-0]',
      'i2:c7i.2xlarge[b-0]',
      'i3:c7i.xlarge[c-0]',
    ]);
    expect(plan.decision.chosen).toBe('baseline');
    expect(plan.decision.reason).toContain('1 same-bin');
  });

  it('up-packs a shorter task into the longer-bin instance with the most free capacity', () => {
    // remaining 100 s → bin 6; all instances are in higher bins; i2 has [0,4,8] free (Σ 12) vs [0,2,4] (Σ 6).
    const plan = stratus().plan(
      snapshot({
        instances: fleet,
        jobs: [...running, { id: 'n', demand: [0, 2, 4], remainingSeconds: 100 }],
      }),
    );
    expect(layout(plan.configuration)).toContain('i2:c7i.2xlarge[b-0,n-0]');
    expect(plan.decision.reason).toContain('1 up-packed');
  });

  it('down-packs a longer task only when no same-bin or longer instance fits', () => {
    const plan = stratus().plan(
      snapshot({
        instances: fleet,
        jobs: [...running, { id: 'n', demand: [0, 2, 4], remainingSeconds: 1e6 }],
      }),
    );
    expect(layout(plan.configuration)).toContain('i2:c7i.2xlarge[b-0,n-0]');
    expect(plan.decision.reason).toContain('1 down-packed');
  });

  it('scales out in groups of 1, 2, … by descending remaining time, each on its most cost-efficient type', () => {
    const plan = stratus().plan(
      snapshot({
        jobs: [
          { id: 't3', demand: [0, 2, 4], remainingSeconds: 7000 },
          { id: 't1', demand: [0, 2, 4], remainingSeconds: 9000 },
          { id: 't2', demand: [0, 2, 4], remainingSeconds: 8000 },
        ],
      }),
    );
    // Group [t1]: c7i.large scores (2/2)/0.08925 = 11.2 > r7i.large (2/2)/0.1323 = 7.6.
    // Group [t2, t3] = [0,4,8]: c7i.xlarge (4/2)/0.1785 = 11.2 > r7i.xlarge 7.6 > c7i.2xlarge 5.6.
    expect(layout(plan.configuration)).toEqual(['new-1:c7i.large[t1-0]', 'new-2:c7i.xlarge[t2-0,t3-0]']);
    expect(plan.configuration.instances.every((i) => i.isNew)).toBe(true);
  });

  it('normalizes GPU groups by the smallest type of their own family (p3.2xlarge for a 1-GPU task)', () => {
    const plan = stratus().plan(
      snapshot({ jobs: [{ id: 'g', demand: [1, 4, 10], remainingSeconds: 5000 }] }),
    );
    expect(layout(plan.configuration)).toEqual(['new-1:p3.2xlarge[g-0]']);
  });
});

describe('StratusScheduler clearing', () => {
  it('evacuates an instance using < 50% of every resource and re-places its task', () => {
    const plan = stratus().plan(
      snapshot({
        instances: [{ id: 'big', type: 'c7i.4xlarge' }],
        jobs: [{ id: 'a', demand: [0, 2, 4], on: 'big', remainingSeconds: 3600 }],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['new-1:c7i.large[a-0]']);
    expect(plan.decision.reason).toContain('cleared under-used instance(s) big');
    expect(plan.decision.candidates[0]?.movedJobs).toEqual(['a']);
  });

  it('moves evacuated tasks onto other instances of the plan before launching any', () => {
    const plan = stratus().plan(
      snapshot({
        instances: [
          { id: 'big', type: 'c7i.4xlarge' },
          { id: 'half', type: 'c7i.xlarge' },
        ],
        jobs: [
          { id: 'a', demand: [0, 2, 4], on: 'big', remainingSeconds: 3600 },
          { id: 'b', demand: [0, 2, 4], on: 'half', remainingSeconds: 3600 },
        ],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['half:c7i.xlarge[a-0,b-0]']);
  });

  it('keeps a lone task on its cheapest type, and instances hosting pinned or protected jobs', () => {
    const plan = stratus().plan(
      snapshot({
        now: 100,
        instances: [
          { id: 'min', type: 'c7i.large' },
          { id: 'pinned', type: 'c7i.4xlarge' },
          { id: 'protected', type: 'c7i.4xlarge' },
        ],
        jobs: [
          { id: 'a', demand: [0, 1, 2], on: 'min', remainingSeconds: 3600 },
          { id: 'p', demand: [0, 2, 4], on: 'pinned', remainingSeconds: 3600, reconfigurable: false },
          {
            id: 'w',
            demand: [0, 2, 4],
            on: 'protected',
            remainingSeconds: 3600,
            runningSinceSeconds: 0,
            noMoveSeconds: 600,
          },
        ],
      }),
    );
    expect(layout(plan.configuration)).toEqual([
      'min:c7i.large[a-0]',
      'pinned:c7i.4xlarge[p-0]',
      'protected:c7i.4xlarge[w-0]',
    ]);
    expect(plan.decision.pinned).toEqual([
      { jobId: 'w', why: 'asked not to be moved until 600 s after its init' },
    ]);
  });

  it('re-places cleared tasks by packing first, then scale-out groups (not back together on one new instance)', () => {
    const plan = stratus().plan(
      snapshot({
        instances: [{ id: 'i', type: 'c7i.2xlarge' }],
        jobs: [
          { id: 'x', demand: [0, 1, 2], on: 'i', remainingSeconds: 5000 },
          { id: 'y', demand: [0, 1, 2], on: 'i', remainingSeconds: 4000 },
        ],
      }),
    );
    // Nothing to pack onto; scale-out groups [x] and [y] (sizes 1, 2, …), each on a c7i.large: $0.1785/h vs $0.357/h.
    expect(layout(plan.configuration)).toEqual([
      `new-1:c7i.large[${taskId('x')}]`,
      `new-2:c7i.large[${taskId('y')}]`,
    ]);
  });

  it('does not clear an instance only to rebuild the same one elsewhere (no migration for nothing)', () => {
    // Cleared, task a would down-pack onto the empty c7i.4xlarge `e`: the same instance again. The clearing is undone.
    const plan = stratus().plan(
      snapshot({
        instances: [
          { id: 'i', type: 'c7i.4xlarge' },
          { id: 'e', type: 'c7i.4xlarge' },
        ],
        jobs: [{ id: 'a', demand: [0, 2, 4], on: 'i', remainingSeconds: 3600 }],
      }),
    );
    expect(layout(plan.configuration)).toEqual(['i:c7i.4xlarge[a-0]']);
    expect(plan.decision.candidates[0]?.movedJobs).toEqual([]);
  });
});
