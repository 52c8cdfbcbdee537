import { describe, expect, it } from 'vitest';
import { executeControllerRun } from '../../src/sim/controller-runtime/execute.js';
import { executeRun, type RunRequest } from '../../src/sim/run-request.js';

/**
 * With spot open, the $ cap is kept at the prices the fleet is bought at (a spot instance at its pool's), so admission
 * must size the jobs that may go on spot at spot prices too: sized on demand, they would count two to three times what
 * they cost and the fleet would run at a fraction of the cap while jobs wait.
 */
describe('admission under a $ cap with spot open', () => {
  const trace: RunRequest['trace'] = { format: 'alibaba', jobs: 60, seed: 1, multiTaskShare: 0.5 };
  const base: RunRequest = { scheduler: 'eva', trace, spot: {} };

  it('fills the cap, in the engine and the controller runtime alike', async () => {
    const uncapped = executeRun(base).summary.peakCostPerHour;
    const cap = Math.round(0.6 * uncapped * 100) / 100;
    const capped: RunRequest = {
      ...base,
      queue: { kind: 'srpt', caps: { maxCostPerHour: cap }, predict: false, admitBy: 'plan-cost' },
    };
    const engine = executeRun(capped).summary.peakCostPerHour;
    expect(engine).toBeLessThanOrEqual(cap + 1e-9);
    expect(engine).toBeGreaterThan(0.9 * cap);

    const controller = (await executeControllerRun({ ...capped, runtime: 'controller' })).summary
      .peakCostPerHour;
    expect(controller).toBeLessThanOrEqual(cap + 1e-9);
    expect(controller).toBeGreaterThan(0.9 * cap);
  });
});
