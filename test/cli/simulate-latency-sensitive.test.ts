/**
 * `simulate --latency-sensitive SHARE` gives a curve to multi-task jobs that declare no network of their own: on a trace
 * without one it would change nothing, and is refused, naming the flag and pointing to --multi-task.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { ValidationError } from '../../src/core/validation.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetwise-latency-sensitive-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function refusal(...args: string[]): string {
  try {
    simulationPlan(parseSimulateArgs([...args, '--scheduler', 'eva'], 'test'));
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return (e as Error).message;
  }
  return 'accepted';
}

const POINTER = 'generated traces (alibaba, synthetic, success) get multi-task jobs with --multi-task';

describe('--latency-sensitive on a trace without a multi-task job to give a curve', () => {
  it('is refused for single-task traces: the bundled Eva trace, a synthetic one without --multi-task', () => {
    expect(refusal('--format', 'eva', '--latency-sensitive', '0.5')).toBe(
      '--latency-sensitive: gives a share of the multi-task jobs without a network of their own a curve, and the ' +
        `trace has none (200 single-task, 0 declaring a network): ${POINTER}`,
    );
    const synthetic = ['--format', 'synthetic', '--jobs', '12', '--seed', '5', '--latency-sensitive', '1'];
    expect(refusal(...synthetic)).toMatch(
      /^--latency-sensitive: .*\(12 single-task, 0 declaring a network\)/,
    );
    expect(refusal(...synthetic, '--multi-task', '1')).toBe('accepted');
    expect(refusal('--format', 'synthetic', '--jobs', '12', '--latency-sensitive', '0')).toBe('accepted');
  });

  it('is refused when every multi-task job declares its own network', () => {
    const task = (name: string) => ({ name, workload: 'resnet18', demand: { any: [0, 2, 4] } });
    const job = (id: string, tasks: string[], network?: object) => ({
      id,
      name: 'r',
      workload: 'resnet18',
      arrivalSeconds: 0,
      durationSeconds: 600,
      tasks: tasks.map(task),
      ...(network === undefined ? {} : { network }),
    });
    const path = join(dir, 'declared.json');
    const write = (jobs: object[]) =>
      writeFileSync(path, JSON.stringify({ format: 'fleetwise-trace/v1', jobs }));
    write([job('job-1', ['a', 'b'], { sensitivity: 'memcached' }), job('job-2', ['a'])]);
    expect(refusal('--trace', path, '--latency-sensitive', '0.5')).toMatch(
      /^--latency-sensitive: .*\(1 single-task, 1 declaring a network\)/,
    );
    write([job('job-1', ['a', 'b'], { sensitivity: 'memcached' }), job('job-2', ['a', 'b'])]);
    expect(refusal('--trace', path, '--latency-sensitive', '0.5')).toBe('accepted');
  });
});
