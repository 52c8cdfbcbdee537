import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { Catalog } from '../../src/core/catalog.js';
import { ValidationError } from '../../src/core/validation.js';
import { catalogCanHost } from '../../src/sim/traces/alibaba.js';
import { loadTrace, type TraceFormat } from '../../src/sim/traces/load.js';
import { MAX_TRACE_ARRIVAL_SECONDS } from '../../src/sim/traces/trace-bounds.js';
import { scaleArrivalRate } from '../../src/sim/traces/transform.js';
import { trace, traceJob } from './sim-fixtures.js';

/**
 * Generated and converted traces (alibaba, synthetic, success) and rescaled ones are held to the bounds a trace file
 * is: arrivals within ten years, and every task hostable by some instance type of the run's catalog.
 */

const catalog = loadCatalogFile();
/** The bundled catalog without its GPU types: the generated GPU workloads have nowhere to run. */
const cpuOnly: Catalog = { ...catalog, types: catalog.types.filter((t) => t.capacity[0] === 0) };

const dir = mkdtempSync(join(tmpdir(), 'fleetwise-trace-bounds-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function refusal(load: () => unknown): ValidationError {
  try {
    load();
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return e as ValidationError;
  }
  throw new Error('accepted');
}

function podList(name: string, rows: readonly string[]): string {
  const path = join(dir, name);
  writeFileSync(path, ['name,cpu_milli,memory_mib,num_gpu,pod_phase', ...rows].join('\n'));
  return path;
}

describe('arrivals of rescaled and generated traces', () => {
  it('refuses a rescaled trace arriving past ten years, naming --arrival-rate-scale; up to it is kept', () => {
    const half = MAX_TRACE_ARRIVAL_SECONDS / 2;
    const kept = scaleArrivalRate(trace(traceJob('a'), traceJob('b', { arrivalSeconds: half })), 0.5);
    expect(kept.jobs.map((j) => j.arrivalSeconds)).toEqual([0, MAX_TRACE_ARRIVAL_SECONDS]);
    const error = refusal(() =>
      scaleArrivalRate(trace(traceJob('a'), traceJob('b', { arrivalSeconds: half + 1 })), 0.5),
    );
    expect(error.source).toBe('--arrival-rate-scale');
    expect(error.problems).toEqual([
      `at x = 0.5, job b (of 2) arrives at ${MAX_TRACE_ARRIVAL_SECONDS + 2} s, later than the ` +
        `${MAX_TRACE_ARRIVAL_SECONDS} s (ten years) a trace may span: raise x (arrival times scale by 1/x) or ` +
        'simulate fewer --jobs',
    ]);
  });

  it('refuses a tiny scale of a trace file rather than simulating centuries of rounds', () => {
    const error = refusal(() => loadTrace(undefined, { format: 'eva', arrivalRateScale: 1e-15 }));
    expect(error.source).toBe('--arrival-rate-scale');
    expect(error.problems[0]).toMatch(
      /^at x = 1e-15, job \S+ \(of 200\) arrives at \d+(e\+\d+)? s, later than/,
    );
  });

  it.each(['alibaba', 'synthetic', 'success'] as const)(
    'refuses %s traces generated past ten years, and generates them within',
    (format: TraceFormat) => {
      const error = refusal(() =>
        loadTrace(undefined, { format, jobs: 300, arrivalRateScale: 0.001, instanceCatalog: catalog }),
      );
      expect(error.source).toBe('--arrival-rate-scale');
      expect(error.problems[0]).toMatch(/^at x = 0\.001, job 299 \(of 300\) arrives at \d+ s, later than/);
      const within = loadTrace(undefined, {
        format,
        jobs: 300,
        arrivalRateScale: 0.1,
        instanceCatalog: catalog,
      });
      expect(Math.max(...within.jobs.map((j) => j.arrivalSeconds))).toBeLessThanOrEqual(
        MAX_TRACE_ARRIVAL_SECONDS,
      );
    },
  );
});

describe("generated traces against the run's catalog", () => {
  it.each(['synthetic', 'success'] as const)(
    'refuses %s traces whose tasks no instance type can host, naming the job, before the run',
    (format: TraceFormat) => {
      const error = refusal(() =>
        loadTrace(undefined, { format, jobs: 40, seed: 1, instanceCatalog: cpuOnly }),
      );
      expect(error.source).toMatch(/seed 1/);
      expect(error.problems.length).toBeGreaterThan(0);
      for (const problem of error.problems.filter((p) => !p.startsWith('…')))
        expect(problem).toMatch(
          /^job \S+ task \S+: demand(\.\w+: family \w+ is not in the us-east-1 catalog|: no instance type of the us-east-1 catalog can host )/,
        );
      // The same trace is hostable with the GPU types.
      expect(loadTrace(undefined, { format, jobs: 40, seed: 1, instanceCatalog: catalog }).jobs).toHaveLength(
        40,
      );
    },
  );
});

describe('Alibaba pods kept only when hostable at the demand they keep', () => {
  const largestCpu = Math.max(...cpuOnly.types.map((t) => t.capacity[1]));

  it('judges CPU-only demands at their whole vCPUs, as the scheduler places them', () => {
    expect(catalogCanHost(catalog, [0, largestCpu, 16])).toBe(true);
    // Eva's filter counted half: floor(193 / 2) = 96 vCPUs fit, but the 193 kept could never be placed.
    expect(catalogCanHost(catalog, [0, largestCpu + 1, 16])).toBe(false);
    expect(catalogCanHost(catalog, [0, 2 * largestCpu, 16])).toBe(false);
  });

  it('drops a CPU-only pod larger than every type as unhostable instead of keeping a job that fails the run', () => {
    const big = `${(largestCpu + 1) * 1000}`;
    const mixed = podList('mixed.csv', [`p1,${big},16384,0,Running`, 'p2,4000,8192,1,Running']);
    const converted = loadTrace(mixed, { format: 'alibaba', instanceCatalog: catalog });
    expect(converted.jobs.map((j) => j.tasks.map((t) => t.demand))).toEqual([[{ any: [1, 4, 8] }]]);

    const fits = podList('fits.csv', [`p1,${largestCpu * 1000},16384,0,Running`]);
    expect(
      loadTrace(fits, { format: 'alibaba', instanceCatalog: catalog }).jobs[0]?.tasks[0]?.demand,
    ).toEqual({
      any: [0, largestCpu, 16],
    });

    const only = podList('only.csv', [`p1,${big},16384,0,Running`]);
    const error = refusal(() => loadTrace(only, { format: 'alibaba', instanceCatalog: catalog }));
    expect(error.source).toBe(only);
    expect(error.problems).toEqual([
      'no pod remains to simulate (dropped 0 Failed, 1 no instance type can host, 0 asking for no GPU, vCPU or memory)',
    ]);
  });
});
