import { describe, expect, it } from 'vitest';
import { MarkedUnsuccessfulError } from '../../src/controller/job-control.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { ValidationError } from '../../src/core/validation.js';
import { example } from '../helpers/job-history.js';
import { rig, type Rig } from './controller-fixtures.js';

/**
 * `fleetwise job ID --mark-unsuccessful --stage N`: the stage is one the job reached, and a job is marked once (a
 * second mark with another stage or reason is refused, not dropped without a word).
 */

/** Stages of 600, 1200 and 2400 s: stage 2 begins at 600 / 4200 = 14.3% of the run, stage 3 at 1800 / 4200 = 42.9%. */
const TRIAL: JobSpec = example('trial-stages.yaml');

function problemsOf(mark: () => unknown): readonly string[] {
  try {
    mark();
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return (e as ValidationError).problems;
  }
  throw new Error('expected the mark to be refused');
}

async function running(): Promise<{ r: Rig; id: string }> {
  const r = rig();
  const id = r.controller.submit(TRIAL, 'vision').id;
  await r.controller.runRound('test');
  expect(r.store.getJob(id)?.state).toBe('running');
  return { r, id };
}

describe('marking a job unsuccessful at a stage', () => {
  it('refuses any stage for a job that has not run yet, and leaves it queued', async () => {
    const r = rig({ caps: { maxInstances: 0 } });
    try {
      const id = r.controller.submit(TRIAL, 'vision').id;
      await r.controller.runRound('test');
      expect(r.store.getJob(id)?.state).toBe('queued');
      expect(problemsOf(() => r.controller.markUnsuccessful(id, { stage: 1 }))).toEqual([
        `stage: ${id} has not run yet, so it reached no stage (mark it without one)`,
      ]);
      expect(r.store.getJob(id)?.state).toBe('queued');
      expect(r.controller.markUnsuccessful(id, { reason: 'search ended' }).reason).toBe(
        'stopped as unsuccessful: search ended',
      );
    } finally {
      await r.controller.stop();
    }
  });

  it('refuses a stage past the one its reported progress is in, and takes one it reached', async () => {
    const { r, id } = await running();
    try {
      r.store.recordJobProgress(id, 1000, 4200);
      expect(problemsOf(() => r.controller.markUnsuccessful(id, { stage: 3 }))).toEqual([
        `stage: ${id} reported 23.8% of its iterations, which is in stage 2 of 3 (stage 3 begins at 42.9%), got 3`,
      ]);
      expect(r.store.getJob(id)?.state).toBe('running');
      // A stage begins exactly at its share of the run.
      r.store.recordJobProgress(id, 1800, 4200);
      const ended = r.controller.markUnsuccessful(id, { stage: 3, reason: 'plateaued' });
      expect(ended).toMatchObject({
        state: 'unsuccessful',
        reason: 'stopped as unsuccessful at stage 3: plateaued',
      });
    } finally {
      await r.controller.stop();
    }
  });

  it('takes stage 1 of a job that ran, and a later stage as given (saying so) when it reports no progress', async () => {
    const r = rig();
    try {
      const [first, second] = [
        r.controller.submit(TRIAL, 'vision').id,
        r.controller.submit(TRIAL, 'vision').id,
      ];
      await r.controller.runRound('test');
      expect([first, second].map((id) => r.store.getJob(id)?.state)).toEqual(['running', 'running']);
      expect(r.controller.markUnsuccessful(first, { stage: 1 }).reason).toBe(
        'stopped as unsuccessful at stage 1 by request',
      );
      expect(r.controller.markUnsuccessful(second, { stage: 3 }).reason).toBe(
        'stopped as unsuccessful at stage 3 (as given: no progress reported) by request',
      );
    } finally {
      await r.controller.stop();
    }
  });
});

describe('marking an unsuccessful job again', () => {
  it('answers with the job when asked with nothing or the same stage and reason, and refuses other ones', async () => {
    const { r, id } = await running();
    try {
      r.store.recordJobProgress(id, 2000, 4200);
      const first = r.controller.markUnsuccessful(id, { stage: 2, reason: 'diverged' });
      expect(first.reason).toBe('stopped as unsuccessful at stage 2: diverged');
      expect(r.controller.markUnsuccessful(id, { stage: 2, reason: 'diverged' })).toEqual(first);
      expect(r.controller.markUnsuccessful(id)).toEqual(first);
      for (const other of [
        { stage: 1, reason: 'diverged' },
        { stage: 2 },
        { reason: 'diverged' },
        { stage: 3 },
      ])
        expect(() => r.controller.markUnsuccessful(id, other), JSON.stringify(other)).toThrow(
          new MarkedUnsuccessfulError(
            `${id} is already unsuccessful (stopped as unsuccessful at stage 2: diverged): it keeps its first ` +
              'stage and reason; mark it again only with the same ones',
          ),
        );
      expect(r.store.getJob(id)).toEqual(first);
    } finally {
      await r.controller.stop();
    }
  });
});
