import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../../src/core/catalog.js';
import { ValidationError } from '../../../src/core/validation.js';
import {
  alibabaDemandFrequencies,
  catalogCanHost,
  convertAlibabaTrace,
  parseAlibabaPods,
  podDemand,
} from '../../../src/sim/traces/alibaba.js';
import { LineValidationError } from '../../../src/sim/traces/csv.js';
import type { Trace } from '../../../src/world/trace.js';
import { findWorkload } from '../../../src/sim/traces/workloads.js';
import { alibabaCsv, instanceCatalog, workloadCatalog } from './fixtures.js';

const convert = (
  options: {
    seed?: number;
    jobs?: number;
    arrivalRateScale?: number;
    multiTaskShare?: number;
    shuffle?: boolean;
  } = {},
): Trace =>
  convertAlibabaTrace(
    alibabaCsv,
    { instanceCatalog, workloadCatalog, ...options },
    'openb_pod_list_default.csv',
  );

const full = convert({ seed: 7 });
const gpusOf = (t: Trace): number[] => t.jobs.map((j) => j.tasks[0]?.demand.any?.[0] ?? -1);
const countBy = <T>(xs: readonly T[]): Map<T, number> => {
  const m = new Map<T, number>();
  for (const x of xs) m.set(x, (m.get(x) ?? 0) + 1);
  return m;
};

describe('Alibaba conversion with Eva recipe (digest §5.2)', () => {
  it('keeps exactly the paper 6,274 jobs with the GPU mix of the digest', () => {
    expect(full.jobs).toHaveLength(6274);
    expect(Object.fromEntries(countBy(gpusOf(full)))).toEqual({ 0: 1087, 1: 5176, 2: 7, 4: 1, 8: 3 });
  });

  it('has 94 distinct demand vectors, each mapped to one workload[k] name', () => {
    const nameByDemand = new Map<string, string>();
    for (const j of full.jobs) {
      const key = JSON.stringify(j.tasks[0]?.demand);
      expect(nameByDemand.get(key) ?? j.name).toBe(j.name);
      nameByDemand.set(key, j.name);
      expect(j.name).toMatch(/^(a3c|cyclegan|gcn|gpt2|openfoam|sage|seq|resnet18|vit)\[\d+\]$/);
    }
    expect(nameByDemand.size).toBe(94);
    expect(new Set(nameByDemand.values()).size).toBe(94);
  });

  it('gives jobs their workload delays, throughput and identity but the pod demand', () => {
    for (const j of full.jobs.slice(0, 300)) {
      const w = findWorkload(workloadCatalog, j.workload);
      expect(j.name.startsWith(`${w.name}[`)).toBe(true);
      expect(j.fullThroughput).toBe(w.fullThroughput);
      expect(j.initDelaySeconds).toBe(w.initDelaySeconds);
      expect(j.totalIterations).toBe(Math.floor(j.durationSeconds * w.fullThroughput));
      const t = j.tasks[0];
      expect([t?.fetchDelaySeconds, t?.buildImageDelaySeconds, t?.uploadDelaySeconds, t?.imageId]).toEqual([
        w.fetchDelaySeconds,
        w.buildImageDelaySeconds,
        w.uploadDelaySeconds,
        w.imageId,
      ]);
      expect(Object.keys(t?.demand ?? {})).toEqual(['any']);
    }
  });

  it('draws Poisson arrivals with mean 1200 s, scaled by arrivalRateScale', () => {
    const arrivals = full.jobs.map((j) => j.arrivalSeconds);
    expect(
      arrivals.every((a, i) => Number.isInteger(a) && (i === 0 || a >= (arrivals[i - 1] as number))),
    ).toBe(true);
    const mean = (arrivals.at(-1) as number) / arrivals.length;
    expect(mean).toBeGreaterThan(1200 * 0.95);
    expect(mean).toBeLessThan(1200 * 1.05);
    const fast = convert({ seed: 7, arrivalRateScale: 2 });
    const fastMean = (fast.jobs.at(-1)?.arrivalSeconds ?? 0) / fast.jobs.length;
    expect(fastMean / mean).toBeCloseTo(0.5, 2);
    expect(fast.jobs.map((j) => j.durationSeconds)).toEqual(full.jobs.map((j) => j.durationSeconds));
  });

  it('draws Gavel-style durations: 80% in 10^[1.5,3) min, the rest in 10^[3,4) min', () => {
    const durations = full.jobs.map((j) => j.durationSeconds);
    expect(Math.min(...durations)).toBeGreaterThanOrEqual(Math.floor(10 ** 1.5 * 60));
    expect(Math.max(...durations)).toBeLessThan(10 ** 4 * 60);
    const short = durations.filter((d) => d < 60_000).length / durations.length;
    expect(short).toBeGreaterThan(0.77);
    expect(short).toBeLessThan(0.83);
  });

  it('is deterministic for a seed and differs across seeds', () => {
    expect(JSON.stringify(convert({ seed: 7 }))).toBe(JSON.stringify(full));
    const other = convert({ seed: 8 });
    expect(other.jobs.map((j) => j.name)).not.toEqual(full.jobs.map((j) => j.name));
  });

  it('returns the first N jobs of the full trace whatever N (shuffled like Eva, then cut)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 400 }), (n) => {
        // JSON comparison: deep equality of thousands of jobs is slow in vitest
        expect(JSON.stringify(convert({ seed: 7, jobs: n }).jobs)).toBe(
          JSON.stringify(full.jobs.slice(0, n)),
        );
      }),
      { numRuns: 5 },
    );
    expect(() => convert({ jobs: 6275 })).toThrow(/only 6274 pods remain/);
  });

  it('keeps file order without shuffling: the first pod is openb-pod-0000 (1 GPU, 12 vCPU, 16 GiB)', () => {
    const ordered = convert({ seed: 1, jobs: 3, shuffle: false });
    expect(ordered.jobs[0]?.tasks[0]?.demand).toEqual({ any: [1, 12, 16] });
  });

  it('turns a multiTaskShare of jobs into 2- or 4-task jobs with identical demands, leaving the rest alone', () => {
    const multi = convert({ seed: 7, multiTaskShare: 0.3 });
    const counts = countBy(multi.jobs.map((j) => j.tasks.length));
    expect([...counts.keys()].sort()).toEqual([1, 2, 4]);
    const share = ((counts.get(2) ?? 0) + (counts.get(4) ?? 0)) / multi.jobs.length;
    expect(share).toBeGreaterThan(0.27);
    expect(share).toBeLessThan(0.33);
    const strip = (t: Trace): string => JSON.stringify(t.jobs.map((j) => ({ ...j, tasks: [] })));
    expect(strip(multi)).toBe(strip(full));
    multi.jobs.forEach((j, i) => {
      const { name: _first, ...task } = full.jobs[i]?.tasks[0] ?? { name: '' };
      expect(j.tasks.every(({ name: _name, ...rest }) => JSON.stringify(rest) === JSON.stringify(task))).toBe(
        true,
      );
      expect(j.tasks.map((t) => t.name)).toEqual(j.tasks.map((_, k) => `node${k}`));
    });
    // Monotone: a job multi-task at 0.3 keeps its task count at 0.6.
    const more = convert({ seed: 7, multiTaskShare: 0.6 });
    multi.jobs.forEach((j, i) => {
      if (j.tasks.length > 1) expect(more.jobs[i]?.tasks.length).toBe(j.tasks.length);
    });
    expect(convert({ seed: 7, multiTaskShare: 1 }).jobs.every((j) => j.tasks.length > 1)).toBe(true);
  });

  it('rejects out-of-range options naming the option', () => {
    expect(() => convert({ multiTaskShare: 1.5 })).toThrow(ValidationError);
    expect(() => convert({ multiTaskShare: 1.5 })).toThrow(/trace options: multiTaskShare:/);
    expect(() => convert({ arrivalRateScale: 0 })).toThrow(/arrivalRateScale:/);
    expect(() => convert({ jobs: 0 })).toThrow(/jobs:/);
  });
});

describe('Alibaba demand frequencies (scheduler benchmark input)', () => {
  const frequencies = alibabaDemandFrequencies(alibabaCsv, instanceCatalog, 'openb_pod_list_default.csv');

  it('lists the 94 kept vectors with counts summing to 6,274, most frequent first', () => {
    expect(frequencies).toHaveLength(94);
    expect(frequencies.reduce((s, f) => s + f.count, 0)).toBe(6274);
    expect(frequencies[0]).toEqual({ demand: [1, 12, 48], count: 860 });
    expect(frequencies[1]).toEqual({ demand: [1, 12, 46], count: 784 });
    const gpuTotals = new Map<number, number>();
    for (const f of frequencies) gpuTotals.set(f.demand[0], (gpuTotals.get(f.demand[0]) ?? 0) + f.count);
    expect(Object.fromEntries(gpuTotals)).toEqual({ 0: 1087, 1: 5176, 2: 7, 4: 1, 8: 3 });
    expect(
      frequencies.every((f, i) => i === 0 || f.count <= (frequencies[i - 1] as { count: number }).count),
    ).toBe(true);
  });
});

describe('pod filter and demand conversion', () => {
  const header =
    'name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time';

  it('drops pods asking for nothing as it drops unhostable ones, and counts them', () => {
    const csv = `${header}\nzero,0,0,0,0,,LS,Running,0,1,0\nreal,3000,1024,1,1000,,LS,Running,0,1,0\n`;
    const convertCsv = (text: string, jobs?: number): Trace =>
      convertAlibabaTrace(text, { instanceCatalog, workloadCatalog, jobs, seed: 1 }, 'pods.csv');
    const trace = convertCsv(csv);
    expect(trace.jobs.map((j) => j.tasks[0]?.demand.any)).toEqual([[1, 3, 1]]);
    expect(() => convertCsv(csv, 2)).toThrow(
      /only 1 pods remain after filtering \(dropped 0 Failed, 0 no instance type can host, 1 asking for no GPU, vCPU or memory\)/,
    );
    expect(() => convertCsv(`${header}\nzero,0,0,0,0,,LS,Running,0,1,0\n`)).toThrow(
      /^pods\.csv: no pod remains to simulate \(dropped 0 Failed, 0 no instance type can host, 1 asking for no GPU/,
    );
  });

  it('ceils vCPUs, memory and GPUs', () => {
    const [pod] = parseAlibabaPods(`${header}\np,3001,1025,1,500,,LS,Running,0,10,0\n`, 'x.csv');
    expect(pod && podDemand(pod)).toEqual([1, 4, 2]);
  });

  it('keeps a CPU-only demand only where a type hosts it whole: what it keeps, the run can place', () => {
    const cpuOnly: Catalog = {
      provider: 'aws',
      region: 'test',
      types: [
        {
          name: 'c7i.xlarge',
          family: 'c7i',
          capacity: [0, 4, 8],
          costPerHour: 1,
          delays: {
            instantiateSeconds: 1,
            workerStartSeconds: 1,
            workerRegisterSeconds: 1,
            terminateSeconds: 1,
          },
        },
      ],
    };
    expect(catalogCanHost(cpuOnly, [0, 4, 8])).toBe(true);
    expect(catalogCanHost(cpuOnly, [0, 8, 8])).toBe(false); // kept, it could never be placed
    expect(catalogCanHost(cpuOnly, [0, 2, 9])).toBe(false);
    expect(catalogCanHost(instanceCatalog, [1, 8, 61])).toBe(true);
    expect(catalogCanHost(instanceCatalog, [1, 65, 61])).toBe(false); // no GPU type has 65 vCPUs
    expect(catalogCanHost(instanceCatalog, [8, 64, 489])).toBe(false);
  });

  it('drops Failed pods and pods no type can host, and reads files without pod_phase', () => {
    const text = [
      header,
      'a,4000,8192,1,1000,,LS,Running,0,10,0',
      'b,4000,8192,1,1000,,LS,Failed,0,10,0',
      'c,4000,600000,1,1000,,LS,Running,0,10,0',
      'd,2000,4096,0,0,,BE,Pending,0,10,',
    ].join('\n');
    const t = convertAlibabaTrace(text, { instanceCatalog, workloadCatalog, shuffle: false }, 'x.csv');
    expect(t.jobs.map((j) => j.tasks[0]?.demand.any)).toEqual([
      [1, 4, 8],
      [0, 2, 4],
    ]);
    const noPhase = 'name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,1024,2,1000\n';
    expect(parseAlibabaPods(noPhase, 'm.csv')).toEqual([
      { line: 2, name: 'p', cpuMilli: 1000, memoryMiB: 1024, numGpu: 2, podPhase: undefined },
    ]);
  });

  it('reports every malformed line as file:line: field: reason', () => {
    const text = [
      header,
      'ok,4000,8192,1,1000,,LS,Running,0,10,0',
      'bad-cpu,lots,8192,1,1000,,LS,Running,0,10,0',
      'bad-gpu,4000,8192,,1000,,LS,Running,0,10,0',
      'short,4000,8192',
      'negative,4000,-5,1,1000,,LS,Running,0,10,0',
    ].join('\r\n');
    try {
      parseAlibabaPods(text, 'bad.csv');
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(LineValidationError);
      expect(e).toBeInstanceOf(ValidationError);
      const lines = (e as Error).message.split('\n');
      // A short line does not hide the other lines' bad cells: one error says all.
      expect(lines).toEqual([
        'bad.csv:3: cpu_milli: not a non-negative number',
        'bad.csv:4: num_gpu: missing value',
        'bad.csv:5: (row): expected 11 comma-separated fields like the header, found 3',
        'bad.csv:6: memory_mib: not a non-negative number',
      ]);
    }
    const noShort = text
      .split('\r\n')
      .filter((l) => !l.startsWith('short'))
      .join('\n');
    try {
      parseAlibabaPods(noShort, 'bad.csv');
      expect.unreachable();
    } catch (e) {
      expect((e as Error).message.split('\n')).toEqual([
        'bad.csv:3: cpu_milli: not a non-negative number',
        'bad.csv:4: num_gpu: missing value',
        'bad.csv:5: memory_mib: not a non-negative number',
      ]);
    }
    expect(() => parseAlibabaPods('name,cpu_milli,memory_mib\np,1,1\n', 'h.csv')).toThrow(
      'h.csv:1: num_gpu: required column missing from the header',
    );
    expect(() => parseAlibabaPods('', 'e.csv')).toThrow('e.csv:1: (header): the file is empty');
    expect(() => parseAlibabaPods(`${header}\n"unterminated,1,1,1,1,,LS,Running,0,1,0\n`, 'q.csv')).toThrow(
      'q.csv:2: (row): unterminated quoted field',
    );
  });

  it('refuses numbers too large to be finite, naming the line and field', () => {
    const text = [header, 'a,4000,8192,1,1000,,LS,Running,0,10,0', 'b,1e400,8192,1,1000,,LS,Running,0,10,0'];
    expect(() => parseAlibabaPods(text.join('\n'), 'x.csv')).toThrow(
      /^x\.csv:3: cpu_milli: too large a number \(not finite\)$/,
    );
  });

  it('reads pod phases in any case and refuses unknown ones, naming the line', () => {
    const row = (name: string, phase: string) => `${name},4000,8192,1,1000,,LS,${phase},0,10,0`;
    const pods = parseAlibabaPods(
      [header, row('a', 'running'), row('b', 'FAILED'), row('c', 'Succeeded')].join('\n'),
      'x.csv',
    );
    expect(pods.map((p) => p.podPhase)).toEqual(['Running', 'Failed', 'Succeeded']);
    // FAILED is dropped as Failed is, not simulated.
    const t = convertAlibabaTrace(
      [header, row('a', 'running'), row('b', 'FAILED')].join('\n'),
      { instanceCatalog, workloadCatalog, shuffle: false },
      'x.csv',
    );
    expect(t.jobs).toHaveLength(1);
    expect(() =>
      parseAlibabaPods([header, row('a', 'Running'), row('b', 'Bogus')].join('\n'), 'x.csv'),
    ).toThrow(
      'x.csv:3: pod_phase: unknown pod phase "Bogus" (expected Pending, Running, Succeeded, Failed, Unknown)',
    );
  });

  it('refuses a header that names a column twice', () => {
    expect(() =>
      parseAlibabaPods('name,name,cpu_milli,memory_mib,num_gpu\na,b,1000,1024,1\n', 'd.csv'),
    ).toThrow('d.csv:1: name: column given more than once (columns 1 and 2)');
  });

  it('names the missing columns of a one-line file of another kind before saying it has no rows', () => {
    const json = JSON.stringify({ format: 'fleetwise-trace/v1', jobs: [] });
    expect(() => parseAlibabaPods(`${json}\n`, 'f.json')).toThrow(
      [
        'f.json:1: name: required column missing from the header',
        'f.json:1: cpu_milli: required column missing from the header',
        'f.json:1: memory_mib: required column missing from the header',
        'f.json:1: num_gpu: required column missing from the header',
      ].join('\n'),
    );
    expect(() => parseAlibabaPods('name,cpu_milli,memory_mib\n', 'h.csv')).toThrow(
      /^h\.csv:1: num_gpu: required column missing from the header$/,
    );
    // Lines ending in a lone CR read as one header line: that is said first, whatever columns it seems to lack.
    expect(() => parseAlibabaPods('name,cpu_milli,memory_mib,num_gpu\ra,1,1,1\r', 'cr.csv')).toThrow(
      /^cr\.csv:1: \(rows\): no data rows: the lines end in a lone CR/,
    );
  });

  it('says a file has no data rows, and why when its lines end in a lone CR', () => {
    expect(() => parseAlibabaPods(`${header}\n`, 'h.csv')).toThrow(
      'h.csv:1: (rows): no data rows after the header',
    );
    const crOnly = [header, 'a,4000,8192,1,1000,,LS,Running,0,10,0', 'b,4000,8192,1,1000,,LS,Running,0,10,0'];
    expect(() => parseAlibabaPods(crOnly.join('\r'), 'cr.csv')).toThrow(
      'cr.csv:1: (rows): no data rows: the lines end in a lone CR',
    );
    expect(() =>
      convertAlibabaTrace(crOnly.join('\r'), { instanceCatalog, workloadCatalog }, 'cr.csv'),
    ).toThrow(/lone CR/);
  });

  it('refuses --jobs beyond the pods that remain as invalid input', () => {
    const text = [header, 'a,4000,8192,1,1000,,LS,Running,0,10,0'].join('\n');
    expect(() => convertAlibabaTrace(text, { instanceCatalog, workloadCatalog, jobs: 2 }, 'x.csv')).toThrow(
      ValidationError,
    );
  });
});
