import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/core/validation.js';
import { convertAlibabaTrace } from '../../../src/sim/traces/alibaba.js';
import {
  loadAlibabaDemandFrequencies,
  loadContentionMatrix,
  loadTrace,
  loadWorkloadCatalog,
} from '../../../src/sim/traces/load.js';
import { alibabaCsv, instanceCatalog, workloadCatalog } from './fixtures.js';

describe('loadTrace', () => {
  it('reads the bundled pai_200 for eva, cut to the first N jobs and rate-scaled', () => {
    const all = loadTrace(undefined, { format: 'eva' });
    expect(all.jobs).toHaveLength(200);
    expect(all.name).toBe('pai_200.json');
    const first = loadTrace(undefined, { format: 'eva', jobs: 30, arrivalRateScale: 2 });
    expect(first.jobs).toHaveLength(30);
    expect(first.jobs.map((j) => j.id)).toEqual(all.jobs.slice(0, 30).map((j) => j.id));
    expect(first.jobs[0]?.arrivalSeconds).toBe(480); // 960 s / 2
    // Named by the flag a user gave, as bad input (exit 2), not by an option's internal name.
    expect(() => loadTrace(undefined, { format: 'eva', multiTaskShare: 0.5 })).toThrow(
      /^--multi-task: applies to generated traces .*not to Eva JSON/,
    );
    expect(() => loadTrace(undefined, { format: 'eva', arrivalGapSeconds: 30 })).toThrow(
      /^--arrival-gap-seconds: applies to a directory of job specs/,
    );
    expect(() => loadTrace('x.json', { format: 'synthetic' })).toThrow(
      /^--trace: a synthetic trace is generated, not read/,
    );
    expect(() => loadTrace(undefined, { format: 'eva', jobs: 201 })).toThrow(/only 200/);
  });

  it('converts the bundled Alibaba pod list with the bundled catalogs', () => {
    const t = loadTrace(undefined, { format: 'alibaba', seed: 3, jobs: 100, multiTaskShare: 0.2 });
    const direct = convertAlibabaTrace(
      alibabaCsv,
      { instanceCatalog, workloadCatalog, seed: 3, jobs: 100, multiTaskShare: 0.2 },
      'x',
    );
    expect(JSON.stringify(t.jobs)).toBe(JSON.stringify(direct.jobs));
    expect(t.name).toBe('openb_pod_list_default.csv (seed 3)');
  });

  it('generates synthetic traces and refuses a path for them', () => {
    const t = loadTrace(undefined, { format: 'synthetic', seed: 1, jobs: 10, tasksPerJob: 2 });
    expect(t.jobs.map((j) => j.tasks.length)).toEqual(Array(10).fill(2));
    expect(() => loadTrace('x.json', { format: 'synthetic' })).toThrow(/generated, not read/);
  });

  it('names a missing file', () => {
    expect(() => loadTrace('/nonexistent/trace.json', { format: 'eva' })).toThrow(ValidationError);
    expect(() => loadTrace('/nonexistent/trace.json', { format: 'eva' })).toThrow(
      /^\/nonexistent\/trace\.json: cannot read Eva JSON trace/,
    );
    expect(() => loadWorkloadCatalog('/nonexistent/wc.json')).toThrow(
      /^\/nonexistent\/wc\.json: cannot read/,
    );
  });

  it('loads the bundled matrix, catalog and demand frequencies', () => {
    expect(loadContentionMatrix().rate('gpt2', ['resnet18'])).toBe(0.793);
    expect(loadWorkloadCatalog().workloads).toHaveLength(10);
    expect(loadAlibabaDemandFrequencies()).toHaveLength(94);
  });
});
