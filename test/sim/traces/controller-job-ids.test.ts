import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../../src/cloud/catalog-file.js';
import { loadRequestTrace } from '../../../src/sim/run-request.js';
import { withControllerJobIds } from '../../../src/sim/traces/controller-job-ids.js';
import type { Trace, TraceJob } from '../../../src/world/trace.js';

const catalog = loadCatalogFile();

describe('trace jobs named as the controller names them', () => {
  it('names jobs job-1, job-2, … in arrival order and renames their dependencies with them', () => {
    const cut = loadRequestTrace({ trace: { format: 'eva', jobs: 12 } }, catalog);
    const jobs = cut.jobs.map((j, i): TraceJob => (i === 11 ? { ...j, dependsOn: ['9', '10'] } : j));
    const renamed = withControllerJobIds({ ...cut, jobs });
    expect(cut.jobs.map((j) => j.id)).toEqual(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11']);
    expect(renamed.jobs.map((j) => j.id)).toEqual(Array.from({ length: 12 }, (_, i) => `job-${i + 1}`));
    expect(renamed.jobs[11]?.dependsOn).toEqual(['job-10', 'job-11']);
    // Nothing else changes: the same jobs in the same order.
    expect(renamed.jobs.map(({ id: _, dependsOn: __, ...rest }) => rest)).toEqual(
      jobs.map(({ id: _, dependsOn: __, ...rest }) => rest),
    );
    expect(renamed.name).toBe(cut.name);
  });

  it('renames by position, whatever the trace called its jobs', () => {
    const base = loadRequestTrace({ trace: { format: 'eva', jobs: 3 } }, catalog);
    const trace: Trace = {
      ...base,
      jobs: base.jobs.map((j, i) => ({ ...j, id: ['job-7', 'b', 'job-1'][i] as string })),
    };
    const renamed = withControllerJobIds({
      ...trace,
      jobs: trace.jobs.map((j, i) => (i === 2 ? { ...j, dependsOn: ['job-7'] } : j)),
    });
    expect(renamed.jobs.map((j) => [j.id, j.dependsOn])).toEqual([
      ['job-1', undefined],
      ['job-2', undefined],
      ['job-3', ['job-1']],
    ]);
  });

  it("refuses, in the trace's own names, a duplicate id and a dependency on a job not in the trace", () => {
    const base = loadRequestTrace({ trace: { format: 'eva', jobs: 3 } }, catalog);
    const jobs = base.jobs.map((j, i): TraceJob => {
      if (i === 1) return { ...j, id: '0' };
      if (i === 2) return { ...j, dependsOn: ['job-1'] };
      return j;
    });
    expect(() => withControllerJobIds({ ...base, jobs })).toThrow(
      /job 0: duplicate job id; job 2: dependsOn job-1 is not a job of the trace/,
    );
  });

  it('`jobIds: controller` in a run request renames the loaded trace', () => {
    const own = loadRequestTrace({ trace: { format: 'alibaba', jobs: 5, seed: 3 } }, catalog);
    const named = loadRequestTrace(
      { trace: { format: 'alibaba', jobs: 5, seed: 3, jobIds: 'controller' } },
      catalog,
    );
    expect(named.jobs.map((j) => j.id)).toEqual(['job-1', 'job-2', 'job-3', 'job-4', 'job-5']);
    expect(named.jobs.map((j) => j.arrivalSeconds)).toEqual(own.jobs.map((j) => j.arrivalSeconds));
  });
});
