import { describe, expect, it } from 'vitest';
import { nomoraMix, withLatencySensitivity } from '../../../src/sim/traces/latency-mix.js';
import type { Trace } from '../../../src/world/trace.js';
import { trace, traceJob, traceTask } from '../sim-fixtures.js';

function mixed(n: number): Trace {
  return trace(
    ...Array.from({ length: n }, (_, i) =>
      traceJob(String(i), {
        arrivalSeconds: i,
        tasks: i % 3 === 0 ? [traceTask('node0')] : [traceTask('node0'), traceTask('node1')],
      }),
    ),
  );
}

describe('--latency-sensitive', () => {
  it("gives that share of multi-task jobs NoMora's mix, single-task jobs none, and keeps declared networks", () => {
    const base = mixed(3000);
    const declared = { sensitivity: 'spark' as const, pattern: 'all-to-all' as const, gibPerHour: 1 };
    const withDeclared: Trace = {
      ...base,
      jobs: base.jobs.map((j) => (j.id === '1' ? { ...j, network: declared } : j)),
    };
    const out = withLatencySensitivity(withDeclared, 0.5, 3, 10);
    expect(out.jobs.find((j) => j.id === '1')?.network).toEqual(declared);
    const multi = out.jobs.filter((j) => j.tasks.length > 1 && j.id !== '1');
    const sensitive = multi.filter((j) => j.network !== undefined);
    expect(sensitive.length / multi.length).toBeGreaterThan(0.45);
    expect(sensitive.length / multi.length).toBeLessThan(0.55);
    expect(out.jobs.filter((j) => j.tasks.length === 1).every((j) => j.network === undefined)).toBe(true);
    const share = (name: string) =>
      sensitive.filter((j) => j.network?.sensitivity === name).length / sensitive.length;
    expect(share('memcached')).toBeCloseTo(0.5, 1);
    expect(share('strads')).toBeCloseTo(0.25, 1);
    expect(share('tensorflow')).toBeCloseTo(0.25, 1);
    expect(sensitive.every((j) => j.network?.pattern === 'star' && j.network.gibPerHour === 10)).toBe(true);
  });

  it('refuses a trace with no multi-task job left to give a curve, naming the flag; share 0 takes any trace', () => {
    const single = trace(traceJob('0', { tasks: [traceTask('node0')] }));
    expect(() => withLatencySensitivity(single, 0.5, 3, 10)).toThrow(
      /^--latency-sensitive: .*\(1 single-task, 0 declaring a network\): .*--multi-task$/,
    );
    expect(withLatencySensitivity(single, 0, 3, 10)).toBe(single);
  });

  it('a job sensitive at one share stays so, with its curve, at a larger one; share 0 changes nothing', () => {
    const base = mixed(400);
    expect(withLatencySensitivity(base, 0, 3, 10)).toBe(base);
    const low = withLatencySensitivity(base, 0.3, 3, 10);
    const high = withLatencySensitivity(base, 0.8, 3, 10);
    low.jobs.forEach((j, i) => {
      if (j.network !== undefined) expect(high.jobs[i]?.network).toEqual(j.network);
    });
    expect(withLatencySensitivity(base, 0.3, 3, 10)).toEqual(low);
    expect(withLatencySensitivity(base, 0.3, 4, 10)).not.toEqual(low);
    expect([0, 0.49, 0.5, 0.74, 0.75, 0.99].map(nomoraMix)).toEqual([
      'memcached',
      'memcached',
      'strads',
      'strads',
      'tensorflow',
      'tensorflow',
    ]);
  });
});
