import { describe, expect, it } from 'vitest';
import { completionText } from '../../src/cli/commands/job.js';
import type { PredictFn } from '../../src/controller/eta-predictions.js';
import { predictCompletions } from '../../src/predict/predict.js';
import { CPU_SMALL, jobSpec, rig } from './controller-fixtures.js';

/**
 * `submit --dry-run` estimates: one that gets no completion time still says why (the estimator busy with other dry
 * runs, the prediction failing), so the CLI does not blame a missing expectedDurationSeconds or predictions being off.
 */

const BUSY = "no ETA: the controller is busy with other dry runs' estimates; ask again";

describe('dry-run estimates the controller cannot make', () => {
  it('answer every one of many concurrent dry runs: those past the estimator’s queue say it is busy', async () => {
    const { controller, clock } = rig();
    try {
      const spec = jobSpec('what-if', CPU_SMALL, { expectedDurationSeconds: 600 });
      const etas = await Promise.all(Array.from({ length: 8 }, () => controller.estimate(spec)));
      expect(etas.every((eta) => eta !== null)).toBe(true);
      const predicted = etas.filter((eta) => eta?.completionSeconds !== null);
      const busy = etas.filter((eta) => eta?.completionSeconds === null);
      expect(predicted.length).toBeGreaterThanOrEqual(1);
      for (const eta of predicted) {
        expect(eta?.completionSeconds as number).toBeGreaterThanOrEqual(clock.nowSeconds() + 600);
        expect(eta?.basis).toMatch(/^simulated \d+ round\(s\) ahead/);
      }
      expect(busy.length).toBeGreaterThanOrEqual(1);
      for (const eta of busy)
        expect(eta).toEqual({
          startSeconds: null,
          completionSeconds: null,
          computedAtSeconds: clock.nowSeconds(),
          basis: BUSY,
        });
      expect(predicted.length + busy.length).toBe(8);
      // Once the others are answered, a dry run gets its estimate again.
      expect((await controller.estimate(spec))?.completionSeconds).not.toBeNull();
    } finally {
      await controller.stop();
    }
  });

  it('say the prediction failed, and why, when it throws; a later one predicts again', async () => {
    let fail = true;
    const failing: PredictFn = (input) => {
      if (fail) throw new Error('boom');
      return predictCompletions(input);
    };
    const { controller, clock } = rig({}, { predict: failing });
    try {
      const spec = jobSpec('what-if', CPU_SMALL, { expectedDurationSeconds: 600 });
      const eta = await controller.estimate(spec);
      expect(eta).toEqual({
        startSeconds: null,
        completionSeconds: null,
        computedAtSeconds: clock.nowSeconds(),
        basis: 'no ETA: the prediction failed (boom)',
      });
      // What the CLI prints before the basis: no completion time, not one made up.
      expect(completionText(eta as NonNullable<typeof eta>)).toBeUndefined();
      fail = false;
      expect((await controller.estimate(spec))?.completionSeconds).not.toBeNull();
    } finally {
      await controller.stop();
    }
  });

  it('are null only when the controller makes none: predictions off, or stopped', async () => {
    const spec = jobSpec('what-if', CPU_SMALL, { expectedDurationSeconds: 60 });
    const off = rig({}, { predict: false });
    expect(await off.controller.estimate(spec)).toBeNull();
    await off.controller.stop();
    const stopped = rig();
    await stopped.controller.stop();
    expect(await stopped.controller.estimate(spec)).toBeNull();
  });
});
