import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  capsUsed,
  capViolations,
  dominantShare,
  fitsCaps,
  usageOf,
  type JobFootprint,
  type QueueCaps,
} from '../../src/queue/caps.js';
import { admit, type QueuedJob, type RunningQueuedJob } from '../../src/queue/admit.js';
import { classify, waterFill } from '../../src/queue/class-shares.js';
import { demandCap, intraClassAllocation } from '../../src/queue/intra-class.js';
import { DEFAULT_PREEMPTION, parseWfqConfig, weightsFromDecay, type WfqConfig } from '../../src/queue/wfq.js';

describe('PCS water-filling and caps (digest §10 P4–P6)', () => {
  const w = weightsFromDecay(3, Math.LN2); // (1, ½, ¼)/1.75
  it('P6 weights from 𝒲', () => {
    expect(w).toEqual([expect.closeTo(4 / 7, 12), expect.closeTo(2 / 7, 12), expect.closeTo(1 / 7, 12)]);
    expect(weightsFromDecay(3, 0)).toEqual([1 / 3, 1 / 3, 1 / 3]);
    expect(weightsFromDecay(3, 1).map((x) => Number(x.toFixed(4)))).toEqual([0.6652, 0.2447, 0.09]);
    expect(weightsFromDecay(3, 3).map((x) => Number(x.toFixed(4)))).toEqual([0.9503, 0.0473, 0.0024]);
  });
  it('P4: demands (2, 10, 10) → (2, 16/3, 8/3); (10, 10, 10) → weights; (0, 10, 10) → (0, 6.667, 3.333)', () => {
    expect(waterFill([2, 10, 10], w, 10)).toEqual([2, expect.closeTo(16 / 3, 12), expect.closeTo(8 / 3, 12)]);
    expect(waterFill([10, 10, 10], w, 10)).toEqual([
      expect.closeTo(40 / 7, 12),
      expect.closeTo(20 / 7, 12),
      expect.closeTo(10 / 7, 12),
    ]);
    expect(waterFill([0, 10, 10], w, 10)).toEqual([
      0,
      expect.closeTo(20 / 3, 12),
      expect.closeTo(10 / 3, 12),
    ]);
    expect(waterFill([1, 1, 1], w, 10)).toEqual([1, 1, 1]);
  });
  it('P5: demand caps with ζ relaxation', () => {
    const a = { id: 'A', maxUnits: 8, speedup: [0, 1, 1.9, 2.7, 3.4, 3.9, 4.32, 4.62, 4.8] };
    expect(demandCap(a, 0.8)).toBe(4);
    expect(demandCap(a, 0.7)).toBe(6);
    const alloc = (bMax: number, units: number) =>
      Object.fromEntries(intraClassAllocation([a, { id: 'B', maxUnits: bMax }], units, 0.8, 0.1));
    expect(alloc(2, 8)).toEqual({ A: 6, B: 2 });
    expect(alloc(4, 8)).toEqual({ A: 4, B: 4 });
    expect(alloc(2, 3)).toEqual({ A: 3, B: 0 });
  });
});

describe('WFQ config', () => {
  it('classifies by size thresholds (fixed at arrival) or by team', () => {
    const bySize = parseWfqConfig({
      classes: [
        { id: 'small', weight: 3, maxSizeSeconds: 3600 },
        { id: 'large', weight: 1 },
      ],
    });
    expect(classify(bySize, { sizeSeconds: 3600 })).toBe('small');
    expect(classify(bySize, { sizeSeconds: 3601 })).toBe('large');
    expect(bySize.preemption).toEqual(DEFAULT_PREEMPTION);
    const byTeam = parseWfqConfig({
      classifyBy: 'team',
      classes: [
        { id: 'ml', weight: 2, teams: ['vision', 'nlp'] },
        { id: 'rest', weight: 1 },
      ],
    });
    expect(classify(byTeam, { sizeSeconds: 1, team: 'nlp' })).toBe('ml');
    expect(classify(byTeam, { sizeSeconds: 1, team: 'web' })).toBe('rest');
  });
  it('rejects bad thresholds with the field path', () => {
    expect(() =>
      parseWfqConfig(
        {
          classes: [
            { id: 'a', weight: 1, maxSizeSeconds: 10 },
            { id: 'b', weight: 1, maxSizeSeconds: 5 },
            { id: 'c', weight: 1 },
          ],
        },
        'controller.yaml queue',
      ),
    ).toThrow(/controller\.yaml queue: classes\.1\.maxSizeSeconds: thresholds must increase/);
    expect(() => parseWfqConfig({ classes: [{ id: 'a', weight: 1, maxSizeSeconds: 10 }] })).toThrow(
      /unbounded/,
    );
    expect(() => parseWfqConfig({ classes: [{ id: 'a', weight: 1, maxShare: 0 }] })).toThrow(
      /classes\.0\.maxShare: must be > 0/,
    );
    expect(() => parseWfqConfig({ classes: [{ id: 'a', weight: 1, maxShare: 1.5 }] })).toThrow(
      /classes\.0\.maxShare: must be ≤ 1/,
    );

    // A misspelt or misplaced key is refused, not ignored (preemption would stay on; every job in the last class).
    expect(() =>
      parseWfqConfig({ classes: [{ id: 'a', weight: 1 }], preemtion: { enabled: false } }),
    ).toThrow(/preemtion/);
    expect(() => parseWfqConfig({ classes: [{ id: 'a', weight: 1, maxshare: 0.5 }] })).toThrow(/maxshare/);
    expect(() =>
      parseWfqConfig({
        classifyBy: 'team',
        classes: [
          { id: 'short', weight: 2, maxSizeSeconds: 600 },
          { id: 'rest', weight: 1 },
        ],
      }),
    ).toThrow(
      /classes\.0\.maxSizeSeconds: a size threshold: classes are by team here[\s\S]*classes: classes by team/,
    );
    expect(() => parseWfqConfig({ classes: [{ id: 'a', weight: 1, teams: ['vision'] }] })).toThrow(
      /classes\.0\.teams: classes are by size here/,
    );
    expect(() =>
      parseWfqConfig({
        classifyBy: 'team',
        classes: [
          { id: 'cv', weight: 2, teams: ['vision', 'robotics'] },
          { id: 'rest', weight: 1, teams: ['nlp', 'vision'] },
        ],
      }),
    ).toThrow(/classes\.1\.teams\.1: team vision is in class cv already: a team belongs to one class/);
  });
});

// Admission fixtures: every instance costs $1/h, caps in instances, so shares are easy to read.
const fp = (jobId: string, instances: number, family = 'c7i'): JobFootprint => ({
  jobId,
  instances: Array.from({ length: instances }, () => ({
    family,
    gpus: family === 'p3' ? 1 : 0,
    vcpus: 4,
    costPerHour: 1,
  })),
});
const qj = (id: string, arrival: number, size: number, instances: number): QueuedJob => ({
  id,
  arrivalSeconds: arrival,
  remainingWorkSeconds: size,
  sizeSeconds: size,
  footprint: fp(id, instances),
});
const run = (j: QueuedJob, admittedSeconds: number): RunningQueuedJob => ({ ...j, admittedSeconds });
const TWO_CLASSES: WfqConfig = parseWfqConfig({
  classes: [
    { id: 'small', weight: 3, maxSizeSeconds: 100, ordering: 'fifo' },
    { id: 'large', weight: 1, ordering: 'fifo' },
  ],
});

describe('admission under caps', () => {
  const caps: QueueCaps = { maxInstances: 8 };

  it('splits the capped capacity 3:1 when both classes are busy, whole jobs only', () => {
    const waiting = [
      qj('L1', 0, 1000, 2),
      qj('L2', 1, 1000, 2),
      qj('L3', 2, 1000, 2),
      qj('S1', 3, 10, 2),
      qj('S2', 4, 10, 2),
      qj('S3', 5, 10, 2),
      qj('S4', 6, 10, 2),
    ];
    const r = admit({ nowSeconds: 10, caps, config: TWO_CLASSES, running: [], waiting });
    expect(r.classes.map((c) => [c.classId, c.fluidShare, c.guaranteedShare])).toEqual([
      ['small', 0.75, 0.75],
      ['large', 0.25, 0.25],
    ]);
    expect(r.admitted).toEqual(['S1', 'S2', 'S3', 'L1']);
    expect(r.queued.map((p) => [p.jobId, p.position, p.reason])).toEqual([
      ['S4', 0, 'class-share'],
      ['L2', 0, 'class-share'],
      ['L3', 1, 'class-share'],
    ]);
    expect(r.usage.instances).toBe(8);
  });

  it("an idle class's share flows to the busy class (work conservation)", () => {
    const waiting = [qj('L1', 0, 1000, 2), qj('L2', 1, 1000, 2), qj('L3', 2, 1000, 2), qj('L4', 3, 1000, 4)];
    const r = admit({ nowSeconds: 10, caps, config: TWO_CLASSES, running: [], waiting });
    expect(r.admitted).toEqual(['L1', 'L2', 'L3']);
    // Its class holds the whole capacity as its share and uses 3/4 of it: the caps hold L4 back, not the share.
    expect(r.queued).toEqual([{ jobId: 'L4', classId: 'large', position: 0, reason: 'caps' }]);
    expect(r.preemptions).toEqual([]);
  });

  it('maxShare caps a class even when the other class is idle; its unused share flows to the others', () => {
    const capped = parseWfqConfig({
      classes: [
        { id: 'small', weight: 3, maxSizeSeconds: 100 },
        { id: 'large', weight: 1, maxShare: 0.25 },
      ],
    });
    const alone = admit({
      nowSeconds: 10,
      caps,
      config: capped,
      running: [],
      waiting: [qj('L1', 0, 1000, 1), qj('L2', 1, 1000, 1), qj('L3', 2, 1000, 1), qj('L4', 3, 1000, 4)],
    });
    // 8 instances: the large class holds at most 2 (0.25); L4 (4 instances = 0.5) can never run in it.
    expect(alone.admitted).toEqual(['L1', 'L2']);
    expect(alone.queued.map((q) => [q.jobId, q.reason])).toEqual([
      ['L3', 'class-share'],
      ['L4', 'never-fits'],
    ]);
    expect(alone.classes.map((c) => [c.classId, c.fluidShare, c.usedShare])).toEqual([
      ['small', 0, 0],
      ['large', 0.25, 0.25],
    ]);
    // With both busy, large takes the one instance it asks for and small the other seven (water-filling).
    const both = admit({
      nowSeconds: 10,
      caps,
      config: capped,
      running: [],
      waiting: [
        qj('L1', 0, 1000, 1),
        ...['S1', 'S2', 'S3', 'S4', 'S5', 'S6', 'S7'].map((id, i) => qj(id, i + 1, 10, 1)),
      ],
    });
    expect(both.admitted).toEqual(['S1', 'S2', 'S3', 'S4', 'S5', 'S6', 'S7', 'L1']);
  });

  it('a job over its class share waits for the caps, not the share, while its class uses less than its share', () => {
    // Small runs 6 of 8 instances; large, using nothing, has 1/4 as its share and its head needs 1/2.
    const running = Array.from({ length: 6 }, (_, i) => run(qj(`s${i}`, i, 10, 1), i));
    const idle = admit({
      nowSeconds: 100,
      caps,
      config: TWO_CLASSES,
      running,
      waiting: [qj('L', 50, 1000, 4)],
    });
    expect(idle.classes.map((c) => [c.classId, c.usedShare, c.fluidShare])).toEqual([
      ['small', 0.75, 0.75],
      ['large', 0, 0.25],
    ]);
    expect(idle.admitted).toEqual([]);
    expect(idle.queued).toEqual([{ jobId: 'L', classId: 'large', position: 0, reason: 'caps' }]);
    // Once the class is at its share, its next job waits for the share.
    const atShare = admit({
      nowSeconds: 100,
      caps,
      config: TWO_CLASSES,
      running: [...running.slice(0, 4), run(qj('L0', 0, 1000, 2), 0)],
      waiting: [qj('L', 50, 1000, 1), qj('s-next', 60, 10, 3)],
    });
    expect(atShare.classes.map((c) => [c.classId, c.usedShare, c.fluidShare])).toEqual([
      ['small', 0.5, 0.75],
      ['large', 0.25, 0.25],
    ]);
    expect(atShare.queued.find((q) => q.jobId === 'L')?.reason).toBe('class-share');
  });

  it('a job larger than the caps waits with reason never-fits and does not block its class share', () => {
    const r = admit({
      nowSeconds: 0,
      caps,
      config: TWO_CLASSES,
      running: [],
      waiting: [qj('huge', 0, 5, 9), qj('after', 1, 5, 1)],
    });
    // The job behind it in its class (fifo) is admitted: a never-fits job is not a head-of-line block.
    expect(r.admitted).toEqual(['after']);
    expect(r.queued).toEqual([
      { jobId: 'huge', classId: expect.any(String), position: 0, reason: 'never-fits' },
    ]);
  });

  it('preempts only when a class reclaims its guarantee, after the hysteresis rounds, newest job first', () => {
    const running = [
      run(qj('L1', 0, 1000, 2), 0),
      run(qj('L2', 1, 1000, 2), 5),
      run(qj('L3', 2, 1000, 2), 6),
      run(qj('L4', 3, 1000, 2), 7),
    ];
    const waiting = [qj('S1', 50, 10, 2)];
    const first = admit({ nowSeconds: 60, caps, config: TWO_CLASSES, running, waiting });
    expect(first.admitted).toEqual([]);
    expect(first.preemptions).toEqual([]); // short for one round only
    expect(first.shortRounds.get('small')).toBe(1);
    const second = admit({
      nowSeconds: 120,
      caps,
      config: TWO_CLASSES,
      running,
      waiting,
      shortRounds: first.shortRounds,
    });
    expect(second.preemptions.map((p) => [p.jobId, p.classId, p.forClassId])).toEqual([
      ['L4', 'large', 'small'],
    ]);
    expect(second.preemptions[0]?.reason).toMatch(
      /class small reclaims its guaranteed share 0\.250 \(using 0\.000, head job S1 needs 0\.250\)/,
    );
    // once the victim has stopped (it is waiting again), the small job is admitted and nobody else is preempted
    const after = admit({
      nowSeconds: 180,
      caps,
      config: TWO_CLASSES,
      running: running.slice(0, 3),
      waiting: [...waiting, { ...qj('L4', 3, 1000, 2), waitingSinceSeconds: 170 }],
      shortRounds: second.shortRounds,
    });
    expect(after.admitted).toEqual(['S1']);
    expect(after.preemptions).toEqual([]);
  });

  it('keeps freed room for the head of a class below its share that the caps hold back (no starvation)', () => {
    // The large class's weight share (.15) is below its head's share (2 of 8 instances), so preemption never asks
    // for it; without a reservation each instance a small job frees would go to the next small job, for good.
    const config = parseWfqConfig({
      classes: [
        { id: 'small', weight: 0.85, maxSizeSeconds: 100, ordering: 'fifo' },
        { id: 'large', weight: 0.15, ordering: 'fifo' },
      ],
    });
    const smalls = (n: number) => Array.from({ length: n }, (_, i) => run(qj(`s${i}`, i, 10, 1), i));
    const waiting = [qj('L', 0, 1000, 2), qj('s-next', 50, 10, 1)];
    const oneFree = admit({ nowSeconds: 100, caps, config, running: smalls(7), waiting });
    expect(oneFree.admitted).toEqual([]);
    expect(oneFree.queued.map((q) => q.jobId)).toEqual(['s-next', 'L']);
    const twoFree = admit({ nowSeconds: 200, caps, config, running: smalls(6), waiting });
    expect(twoFree.admitted).toEqual(['L']);
  });

  it('a head over the whole capacity beside its class, held back by the caps alone, still reserves the room', () => {
    // Small holds 4 of 8 instances and its head needs 5: with no maxShare of its own, only the caps stop it. Plan-cost
    // sizing moves with the fleet, so such a head is short of its guarantee a round later and preempts the large
    // class; had the free room gone to the large class's next job meanwhile, that job would be the one preempted.
    const config = parseWfqConfig({
      classes: [
        { id: 'small', weight: 0.85, maxSizeSeconds: 100, ordering: 'fifo' },
        { id: 'large', weight: 0.15, ordering: 'fifo' },
      ],
    });
    const running = [
      ...Array.from({ length: 4 }, (_, i) => run(qj(`s${i}`, i, 10, 1), i)),
      run(qj('L0', 0, 1000, 1), 0),
    ];
    const r = admit({
      nowSeconds: 100,
      caps,
      config,
      running,
      waiting: [qj('S-big', 10, 50, 5), qj('L1', 20, 1000, 1)],
    });
    expect(r.admitted).toEqual([]);
    // Both classes hold less than their shares: the caps (and S-big's reservation of them) keep both jobs waiting.
    expect(r.queued.map((q) => [q.jobId, q.reason])).toEqual([
      ['S-big', 'caps'],
      ['L1', 'caps'],
    ]);
    // With a ceiling of its own (maxShare), a head over it reserves nothing: the large job takes the free room.
    const ceiling = parseWfqConfig({
      classes: [
        { id: 'small', weight: 0.85, maxSizeSeconds: 100, maxShare: 1, ordering: 'fifo' },
        { id: 'large', weight: 0.15, ordering: 'fifo' },
      ],
    });
    expect(
      admit({
        nowSeconds: 100,
        caps,
        config: ceiling,
        running,
        waiting: [qj('S-big', 10, 50, 5), qj('L1', 20, 1000, 1)],
      }).admitted,
    ).toEqual(['L1']);
  });

  it('behind a reservation, a job that uses none of the caps the head waits on is still admitted', () => {
    // The large class waits on the GPU quota; a CPU job of the small class leaves it alone.
    const quotaCaps: QueueCaps = {
      quotas: [
        { group: 'p', maxGpus: 4 },
        { group: 'standard', maxVcpus: 16 },
      ],
    };
    const gpu = (id: string, arrival: number, size: number, n: number): QueuedJob => ({
      ...qj(id, arrival, size, n),
      footprint: fp(id, n, 'p3'),
    });
    const running = [run(gpu('s0', 0, 10, 3), 0)];
    const r = admit({
      nowSeconds: 100,
      caps: quotaCaps,
      config: TWO_CLASSES,
      running,
      waiting: [gpu('L', 1, 1000, 2), qj('s-cpu', 3, 10, 1)],
    });
    // The small class is at its share (3 of 4 GPUs), so only the work-conserving pass could admit s-cpu.
    expect(r.classes.map((c) => [c.classId, c.fluidShare])).toEqual([
      ['small', 0.75],
      ['large', 0.25],
    ]);
    expect(r.admitted).toEqual(['s-cpu']);
    expect(r.queued.map((q) => q.jobId)).toEqual(['L']);
  });

  it("never admits a class's new job in the round that preempts that class's running jobs", () => {
    const teams = parseWfqConfig({
      classifyBy: 'team',
      classes: [
        { id: 'A', weight: 1, teams: ['a'], ordering: 'fifo' },
        { id: 'B', weight: 1, ordering: 'fifo' },
      ],
      preemption: { enabled: true, marginShare: 0.05, minShortRounds: 1 },
    });
    const b = (i: number): QueuedJob => ({ ...qj(`b${i}`, i, 1000, 1), team: 'b' });
    const running = Array.from({ length: 7 }, (_, i) => run(b(i), i));
    const r = admit({
      nowSeconds: 200,
      caps,
      config: teams,
      running,
      waiting: [{ ...qj('a0', 100, 1000, 4), team: 'a' }, b(7)],
    });
    expect(r.admitted).toEqual([]);
    expect(r.preemptions.map((p) => p.jobId)).toEqual(['b6', 'b5', 'b4']);
  });

  it('a preemption plan counts only jobs a round could stop, so it is never carried out in part', () => {
    const running = [
      run(qj('L1', 0, 1000, 2), 0),
      run(qj('L2', 1, 1000, 2), 5),
      run(qj('L3', 2, 1000, 2), 6),
      { ...run(qj('L4', 3, 1000, 2), 7), preemptible: false }, // in its no-move window
    ];
    const waiting = [qj('S1', 50, 10, 2)];
    const first = admit({ nowSeconds: 60, caps, config: TWO_CLASSES, running, waiting });
    const second = admit({
      ...{ nowSeconds: 120, caps, config: TWO_CLASSES, running, waiting },
      shortRounds: first.shortRounds,
    });
    expect(second.preemptions.map((p) => p.jobId)).toEqual(['L3']);
  });

  it('no preemption when the shortfall is below the margin or preemption is off', () => {
    const running = [run(qj('L1', 0, 1000, 4), 0), run(qj('L2', 1, 1000, 4), 1)];
    const waiting = [qj('S1', 5, 10, 2)];
    const off = { ...TWO_CLASSES, preemption: { ...TWO_CLASSES.preemption, enabled: false } };
    const twice = (config: WfqConfig) => {
      const a = admit({ nowSeconds: 10, caps, config, running, waiting });
      return admit({ nowSeconds: 20, caps, config, running, waiting, shortRounds: a.shortRounds });
    };
    expect(twice(off).preemptions).toEqual([]);
    const wide = { ...TWO_CLASSES, preemption: { ...TWO_CLASSES.preemption, marginShare: 0.8 } };
    expect(twice(wide).preemptions).toEqual([]);
    expect(twice(TWO_CLASSES).preemptions.map((p) => p.jobId)).toEqual(['L2']);
  });

  it('without caps everyone is admitted', () => {
    const r = admit({
      nowSeconds: 0,
      caps: {},
      config: TWO_CLASSES,
      running: [],
      waiting: [qj('a', 0, 1, 50), qj('b', 0, 500, 50)],
    });
    expect(r.admitted).toEqual(['a', 'b']);
  });

  it('srpt and success-rank order a class queue', () => {
    const config = parseWfqConfig({
      classes: [{ id: 'all', weight: 1, ordering: 'srpt' }],
      ordering: { srptAgingPerSecond: 0 },
    });
    const r = admit({
      nowSeconds: 0,
      caps: { maxInstances: 1 },
      config,
      running: [],
      waiting: [qj('long', 0, 500, 1), qj('short', 1, 5, 1)],
    });
    expect(r.admitted).toEqual(['short']);
  });
});

// ------------------------------------------------------------------------------------------------------------
// Properties

const arbJob = (i: number) =>
  fc
    .record({
      arrival: fc.integer({ min: 0, max: 100 }),
      size: fc.integer({ min: 1, max: 1000 }),
      instances: fc.integer({ min: 1, max: 4 }),
      gpu: fc.boolean(),
      cost: fc.constantFrom(0.5, 1, 3),
    })
    .map((r): QueuedJob => ({
      id: `j${i}`,
      arrivalSeconds: r.arrival,
      remainingWorkSeconds: r.size,
      sizeSeconds: r.size,
      footprint: {
        jobId: `j${i}`,
        instances: Array.from({ length: r.instances }, () => ({
          family: r.gpu ? 'p3' : 'c7i',
          gpus: r.gpu ? 1 : 0,
          vcpus: r.gpu ? 8 : 4,
          costPerHour: r.cost,
        })),
      },
    }));
const arbJobs = fc
  .integer({ min: 0, max: 14 })
  .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => arbJob(i))));
const arbCaps = fc.record({
  maxCostPerHour: fc.option(fc.integer({ min: 1, max: 30 }), { nil: undefined }),
  maxInstances: fc.option(fc.integer({ min: 1, max: 12 }), { nil: undefined }),
  quotas: fc.constantFrom(undefined, [{ group: 'p', maxGpus: 4 }], [{ group: 'standard', maxVcpus: 16 }]),
});
const arbConfig = fc
  .record({
    weights: fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 3 }),
    ceilings: fc.array(fc.option(fc.constantFrom(0.2, 0.5, 0.8), { nil: undefined }), {
      minLength: 3,
      maxLength: 3,
    }),
    ordering: fc.constantFrom('fifo', 'srpt', 'success-rank'),
  })
  .map(({ weights, ceilings, ordering }) =>
    parseWfqConfig({
      classes: weights.map((w, k) => ({
        id: `c${k}`,
        weight: w,
        ordering,
        ...(k < weights.length - 1 ? { maxSizeSeconds: (k + 1) * 300 } : {}),
        ...(ceilings[k] !== undefined ? { maxShare: ceilings[k] } : {}),
      })),
    }),
  );

describe('admission properties', () => {
  it('caps are never exceeded; jobs are admitted whole; nothing is lost; no idle capacity a class head could use', () => {
    fc.assert(
      fc.property(
        arbJobs,
        arbCaps,
        arbConfig,
        fc.integer({ min: 0, max: 14 }),
        // The classes' lags (ties included): they rank the classes of the work-conserving pass.
        fc.array(fc.constantFrom(0, 0, -100, 50, 50, 200), { minLength: 3, maxLength: 3 }),
        (jobs, caps, config, nRun, lags) => {
          // Running jobs: a prefix that fits the caps (as a previous round would have left it).
          const running: RunningQueuedJob[] = [];
          for (const j of jobs.slice(0, nRun))
            if (
              fitsCaps(
                [...running, j].map((x) => x.footprint),
                caps,
              )
            )
              running.push({ ...j, admittedSeconds: j.arrivalSeconds });
          const waiting = jobs.filter((j) => !running.includes(j as RunningQueuedJob));
          const lagSeconds = new Map(config.classes.map((c, k) => [c.id, lags[k] as number]));
          const r = admit({ nowSeconds: 200, caps, config, running, waiting, lagSeconds });
          const byId = new Map(jobs.map((j) => [j.id, j]));
          const admittedFootprints = r.admitted.map((id) => (byId.get(id) as QueuedJob).footprint);
          const all = [...running.map((j) => j.footprint), ...admittedFootprints];
          expect(capViolations(usageOf(all, caps), caps)).toEqual([]);
          // whole jobs: the reported usage counts every instance of every admitted job
          expect(r.usage.instances).toBe(all.reduce((s, f) => s + f.instances.length, 0));
          expect([...r.admitted, ...r.queued.map((q) => q.jobId)].sort()).toEqual(
            waiting.map((j) => j.id).sort(),
          );
          // class ceilings: admissions never take a class over its maxShare
          const shareOf = (id: string) => dominantShare((byId.get(id) as QueuedJob).footprint, caps);
          const classUse = new Map<string, number>();
          for (const id of [...running.map((j) => j.id), ...r.admitted]) {
            const c = classify(config, byId.get(id) as QueuedJob);
            classUse.set(c, (classUse.get(c) ?? 0) + shareOf(id));
          }
          const ceilingOf = (c: string) => config.classes.find((k) => k.id === c)?.maxShare ?? 1;
          for (const id of r.admitted) {
            const c = classify(config, byId.get(id) as QueuedJob);
            expect(classUse.get(c) as number).toBeLessThanOrEqual(ceilingOf(c) + 1e-9);
          }
          // work conservation in whole jobs: a class head left waiting that fits in the leftover caps and its
          // ceiling waits behind a reservation: the head of a class below its fluid share that the caps hold back, on
          // a cap the waiting head would use, and that ranked ahead of the waiting head's class (that class at or
          // over its share, or owed more lag, or as much and at least as far below its share)
          const heads = r.queued.filter((x) => x.position === 0 && x.reason !== 'never-fits');
          const fits = (id: string) => fitsCaps([...all, (byId.get(id) as QueuedJob).footprint], caps);
          const deficit = (classId: string) => {
            const c = r.classes.find((k) => k.classId === classId) as (typeof r.classes)[number];
            return c.fluidShare - c.usedShare;
          };
          const lagOf = (classId: string) => lagSeconds.get(classId) ?? 0;
          const ranksAhead = (h: string, q: string) =>
            deficit(q) <= 1e-9 ||
            lagOf(h) > lagOf(q) + 1e-6 ||
            (Math.abs(lagOf(h) - lagOf(q)) <= 1e-6 && deficit(h) >= deficit(q) - 1e-9);
          for (const q of heads) {
            const roomInClass =
              (classUse.get(q.classId) ?? 0) + shareOf(q.jobId) <= ceilingOf(q.classId) + 1e-9;
            if (!roomInClass || !fits(q.jobId)) continue;
            const uses = new Set(capsUsed((byId.get(q.jobId) as QueuedJob).footprint, caps));
            const reservation = heads.find(
              (h) =>
                h.classId !== q.classId &&
                !fits(h.jobId) &&
                deficit(h.classId) > 1e-9 &&
                ranksAhead(h.classId, q.classId) &&
                capViolations(usageOf([...all, (byId.get(h.jobId) as QueuedJob).footprint], caps), caps).some(
                  (c) => uses.has(c),
                ),
            );
            expect(reservation, `${q.jobId} fits and waits with no reservation ahead of it`).toBeDefined();
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('fluid shares sum to min(capacity, demand) and follow the weights when every class is busy', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0, max: 5, noNaN: true }), { minLength: 1, maxLength: 5 }),
        fc.array(fc.double({ min: 0.01, max: 10, noNaN: true }), { minLength: 5, maxLength: 5 }),
        fc.double({ min: 0.1, max: 10, noNaN: true }),
        (demands, rawW, capacity) => {
          const weights = rawW.slice(0, demands.length);
          const wSum = weights.reduce((a, b) => a + b, 0);
          const alloc = waterFill(demands, weights, capacity);
          const total = alloc.reduce((a, b) => a + b, 0);
          expect(total).toBeCloseTo(
            Math.min(
              capacity,
              demands.reduce((a, b) => a + b, 0),
            ),
            6,
          );
          alloc.forEach((a, k) => {
            expect(a).toBeLessThanOrEqual((demands[k] as number) + 1e-9);
            // guarantee: min(w_k·C, D_k)
            expect(a).toBeGreaterThanOrEqual(
              Math.min(((weights[k] as number) / wSum) * capacity, demands[k] as number) - 1e-9,
            );
          });
          const busy = demands.every((d, k) => d >= ((weights[k] as number) / wSum) * capacity);
          if (busy)
            alloc.forEach((a, k) => expect(a).toBeCloseTo(((weights[k] as number) / wSum) * capacity, 6));
        },
      ),
    );
  });

  it('dominant shares under 1 in total always fit the caps', () => {
    fc.assert(
      fc.property(arbJobs, arbCaps, (jobs, caps) => {
        const fps = jobs.map((j) => j.footprint);
        if (fps.reduce((s, f) => s + dominantShare(f, caps), 0) <= 1) expect(fitsCaps(fps, caps)).toBe(true);
      }),
    );
  });
});
