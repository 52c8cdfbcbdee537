/**
 * `simulate --queue-config` with what `fleetwise tune` prints: the queue, and the caps and `admitBy` it was tuned
 * under, so the run is the one tune measured unless a flag says otherwise.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import type { RunRequest } from '../../src/sim/run-request.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetwise-simulate-queue-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const tuned = join(dir, 'tuned.yaml');
writeFileSync(
  tuned,
  'queue:\n  classes:\n    - { id: all, weight: 1 }\ncaps:\n  maxCostPerHour: 20\n  admitBy: plan-cost\n',
);

function request(flags: string): RunRequest {
  return simulationPlan(parseSimulateArgs(flags.split(' '), 'test')).requests[0] as RunRequest;
}

describe('simulate --queue-config with a caps: section', () => {
  it('runs under the caps and admitBy the file says', () => {
    const queue = request(`--format eva --jobs 5 --scheduler eva --queue-config ${tuned}`).queue;
    expect(queue).toMatchObject({ kind: 'wfq', caps: { maxCostPerHour: 20 }, admitBy: 'plan-cost' });
  });

  it('lets the flags win over the file', () => {
    const queue = request(
      `--format eva --jobs 5 --scheduler eva --queue-config ${tuned} --cap-dollars-per-hour 30 --admit-by standalone`,
    ).queue;
    expect(queue).toMatchObject({ caps: { maxCostPerHour: 30 }, admitBy: 'standalone' });
  });
});
