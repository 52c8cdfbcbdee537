import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../../src/cloud/catalog-file.js';
import { ValidationError } from '../../../src/core/validation.js';
import { convertAlibabaTrace } from '../../../src/sim/traces/alibaba.js';
import {
  BUNDLED_EVA_TRACE_PATH,
  loadAlibabaDemandFrequencies,
  loadContentionMatrix,
  loadTrace,
  loadWorkloadCatalog,
} from '../../../src/sim/traces/load.js';
import { alibabaCsv, instanceCatalog, workloadCatalog } from './fixtures.js';

interface EvaJob {
  readonly tasks: Record<string, Record<string, unknown>>;
}

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
    // More jobs than the trace has is bad input (exit 2), like the rest.
    expect(() => loadTrace(undefined, { format: 'eva', jobs: 201 })).toThrow(ValidationError);
    expect(() => loadTrace(undefined, { format: 'eva', jobs: 201 })).toThrow(
      /--jobs: asked for 201 jobs.*only 200/,
    );
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

  it("refuses an Eva or fleetwise file's family the run's catalog lacks, or a demand it cannot host", () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleetwise-load-'));
    try {
      const base = (JSON.parse(readFileSync(BUNDLED_EVA_TRACE_PATH, 'utf8')) as Record<string, EvaJob>)['0'];
      if (base === undefined) throw new Error('pai_200 has no job 0');
      const task = base.tasks['0'];
      const withDemand = (demand: unknown) => ({ ...base, tasks: { '0': { ...task, demand } } });
      const eva = join(dir, 'eva.json');
      writeFileSync(
        eva,
        JSON.stringify({ '0': withDemand({ zzz: [1, 12, 16] }), '1': withDemand({ any: [9999, 1, 1] }) }),
      );
      const problems = (() => {
        try {
          loadTrace(eva, { format: 'eva', instanceCatalog });
        } catch (e) {
          expect(e).toBeInstanceOf(ValidationError);
          return (e as ValidationError).problems;
        }
        return [];
      })();
      expect(problems).toEqual([
        expect.stringMatching(
          /^job 0 task node0: demand\.zzz: family zzz is not in the us-east-1 catalog \(it has /,
        ),
        expect.stringMatching(
          /^job 1 task node0: demand: no instance type of the us-east-1 catalog can host any:9999,1,1/,
        ),
      ]);
      const fleetwise = join(dir, 'history.json');
      const job = { id: 'a', name: 'r', arrivalSeconds: 0, durationSeconds: 60 };
      writeFileSync(
        fleetwise,
        JSON.stringify({
          format: 'fleetwise-trace/v1',
          jobs: [{ ...job, tasks: [{ name: 't', workload: 'w', demand: { zzz: [1, 1, 1] } }] }],
        }),
      );
      expect(() => loadTrace(fleetwise, { format: 'fleetwise', instanceCatalog })).toThrow(
        /job a task t: demand\.zzz: family zzz is not in the us-east-1 catalog/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a specs directory with two arrivals indexes, naming the directory and both, and reads one alone', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleetwise-load-specs-'));
    try {
      copyFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'resnet.yaml'), join(dir, 'resnet.yaml'));
      copyFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'gpt2.yaml'), join(dir, 'gpt2.yaml'));
      writeFileSync(join(dir, 'arrivals.yaml'), 'resnet.yaml: 0\ngpt2.yaml: 30m\n');
      const alone = loadTrace(dir, { format: 'specs', instanceCatalog });
      expect(alone.jobs.map((j) => [j.id, j.arrivalSeconds])).toEqual([
        ['resnet.yaml', 0],
        ['gpt2.yaml', 1800],
      ]);
      writeFileSync(join(dir, 'arrivals.yml'), 'resnet.yaml: 1h\ngpt2.yaml: 0\n');
      const error = (() => {
        try {
          loadTrace(dir, { format: 'specs', instanceCatalog });
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).source).toBe(dir);
      expect((error as ValidationError).problems).toEqual([
        'arrivals.yaml and arrivals.yml both say when the jobs arrive: keep one',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
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
