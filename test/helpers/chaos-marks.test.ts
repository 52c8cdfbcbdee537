import { describe, expect, it } from 'vitest';
import { analyzeJob, parseMarks } from './chaos-marks.js';

/** The chaos test's verdicts come from this analysis: it must see what it claims to see. */

const marks = (...lines: string[]): string => `${lines.join('\n')}\n`;

/** A one-iteration task that ran to its end on i1 (from 100 to 125), then again from the start on i2 (at 400). */
const RUN_ON_I1_THEN_I2 = [
  't/1/i1/10 start 0 100',
  't/1/i1/10 1 125',
  't/1/i1/10 finished 1 125',
  't/1/i2/20 start 0 400',
  't/1/i2/20 1 425',
  't/1/i2/20 finished 1 425',
] as const;

describe('chaos marks', () => {
  it('one run that finished: no restart, no overlap', () => {
    const a = analyzeJob(
      parseMarks(
        marks('t/1/i1/10 start 0 100', 't/1/i1/10 1 125', 't/1/i1/10 2 150', 't/1/i1/10 finished 2 150'),
      ),
      [],
    );
    expect(a).toEqual({
      runs: 1,
      finished: 1,
      unreportedFinishes: 0,
      lastIteration: 2,
      overlaps: [],
      restarts: [],
    });
  });

  it('a checkpoint-stop and a resume where it stopped loses nothing', () => {
    const a = analyzeJob(
      parseMarks(
        marks(
          't/1/i1/10 start 0 100',
          't/1/i1/10 1 125',
          't/1/i1/10 2 150',
          't/1/i1/10 stopped 2 160',
          't/1/i2/20 start 2 300',
          't/1/i2/20 3 325',
          't/1/i2/20 finished 3 325',
        ),
      ),
      [],
    );
    expect(a.overlaps).toEqual([]);
    expect(a.restarts).toEqual([
      { from: 't/1/i1/10', to: 't/1/i2/20', reached: 2, resumedAt: 2, lost: 0, lostSeconds: 0 },
    ]);
  });

  it('work after a worker kill is not counted, work before it that the next run redoes is', () => {
    const a = analyzeJob(
      parseMarks(
        marks(
          't/1/i1/10 start 0 100',
          ...[1, 2, 3, 4, 5, 6].map((n) => `t/1/i1/10 ${n} ${100 + n * 25}`),
          't/1/i2/20 start 2 400',
          't/1/i2/20 3 425',
          't/1/i2/20 finished 3 425',
        ),
      ),
      [{ instance: 'i1', atCs: 200 }],
    );
    // Killed at 200: it had reached 4 (at 200); the next run resumed at 2 (marked at 150): 0.5 s of work redone.
    expect(a.restarts[0]).toMatchObject({ reached: 4, resumedAt: 2, lost: 2, lostSeconds: 0.5 });
    expect(a.overlaps).toEqual([]);
  });

  it('two runs of a job marking progress at the same time overlap, and two finishes are counted', () => {
    const a = analyzeJob(
      parseMarks(
        marks(
          't/1/i1/10 start 0 100',
          't/1/i1/10 1 200',
          't/1/i2/20 start 0 150',
          't/1/i2/20 1 250',
          't/1/i1/10 finished 1 300',
          't/1/i2/20 finished 1 260',
        ),
      ),
      [],
    );
    expect(a.overlaps).toEqual([{ a: 't/1/i1/10', b: 't/1/i2/20', seconds: 1.1 }]);
    expect(a.finished).toBe(2);
  });

  it('a run that finishes after its worker was killed is unreported: the tail run again is its one finish', () => {
    // The worker dies at 200; its task finishes at 210 with no one to report it; the job resumes from 3 elsewhere.
    const a = analyzeJob(
      parseMarks(
        marks(
          't/1/i1/10 start 0 100',
          ...[1, 2, 3, 4].map((n) => `t/1/i1/10 ${n} ${100 + n * 25}`),
          't/1/i1/10 finished 4 210',
          't/1/i2/20 start 3 400',
          't/1/i2/20 4 425',
          't/1/i2/20 finished 4 425',
        ),
      ),
      [{ instance: 'i1', atCs: 200 }],
    );
    expect(a).toMatchObject({ finished: 1, unreportedFinishes: 1, overlaps: [] });
    // Before the kill it had reached 4 (marked at 200): one iteration redone, 0.25 s.
    expect(a.restarts[0]).toMatchObject({ reached: 4, resumedAt: 3, lost: 1, lostSeconds: 0.25 });
    // A finish before the kill still counts as one: finishing twice then is a real second finish.
    const twice = analyzeJob(parseMarks(marks(...RUN_ON_I1_THEN_I2)), [{ instance: 'i1', atCs: 200 }]);
    expect(twice).toMatchObject({ finished: 2, unreportedFinishes: 0 });
    // Unless its exit was not yet in the store when its worker died: then no one could report it.
    const unrecorded = analyzeJob(
      parseMarks(
        marks(
          't/1/i1/10 start 0 100',
          't/1/i1/10 1 125',
          't/1/i1/10 finished 1 125',
          't/1/i2/20 start 1 400',
          't/1/i2/20 finished 1 400',
        ),
      ),
      [{ instance: 'i1', atCs: 200 }],
      new Set(['t/1/i1/10']),
    );
    expect(unrecorded).toMatchObject({ finished: 1, unreportedFinishes: 1 });
  });

  it("a run whose start mark comes after its worker's kill is that worker's: its finish is unreported too", () => {
    // The worker starts the task and dies at 90; the task's shell, slow to start, marks its start at 100 and runs on.
    const a = analyzeJob(parseMarks(marks(...RUN_ON_I1_THEN_I2)), [{ instance: 'i1', atCs: 90 }]);
    expect(a).toMatchObject({ finished: 1, unreportedFinishes: 1 });
    // Nothing it did could reach the store: the next run redoes none of it.
    expect(a.restarts[0]).toMatchObject({ reached: 0, resumedAt: 0, lost: 0, lostSeconds: 0 });
  });

  it('counts lines it cannot read', () => {
    expect(parseMarks(marks('garbage', 't/1/i1/10 start 0 100')).malformed).toBe(1);
  });
});
