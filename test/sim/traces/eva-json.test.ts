import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../../src/cloud/catalog-file.js';
import { ValidationError } from '../../../src/core/validation.js';
import { parseEvaTrace } from '../../../src/sim/traces/eva-json.js';
import { buildSimJobs } from '../../../src/world/trace-jobs.js';
import { ensureBuiltCli, runCli } from '../../helpers/built-cli.js';
import { evaJson } from './fixtures.js';

describe('Eva JSON traces (digest §5.2, §5.3)', () => {
  const trace = parseEvaTrace(evaJson, 'pai_200.json');

  it('parses pai_200 into 200 single-task jobs: 181 with 1 GPU, 19 with none', () => {
    expect(trace.jobs).toHaveLength(200);
    expect(trace.jobs.every((j) => j.tasks.length === 1)).toBe(true);
    const gpus = trace.jobs.map((j) => j.tasks[0]?.demand.any?.[0]);
    expect(gpus.filter((g) => g === 1)).toHaveLength(181);
    expect(gpus.filter((g) => g === 0)).toHaveLength(19);
  });

  it('keeps the first job exactly: resnet18[0] at 960 s, 12,430 s, any [1, 12, 16]', () => {
    const first = trace.jobs[0];
    expect(first).toMatchObject({
      id: '0',
      name: 'resnet18[0]',
      workload: 'resnet18',
      arrivalSeconds: 960,
      durationSeconds: 12430,
      initDelaySeconds: 80,
      fullThroughput: 2.1,
      totalIterations: 26103,
    });
    expect(first?.tasks[0]).toEqual({
      name: 'node0',
      demand: { any: [1, 12, 16] },
      shmSizeGiB: 4,
      imageId: '7',
      fetchDelaySeconds: 1,
      buildImageDelaySeconds: 10,
      killDelaySeconds: 1,
      uploadDelaySeconds: 1,
    });
  });

  it('derives workloads from the name before [ and orders jobs by arrival', () => {
    const counts = new Map<string, number>();
    for (const j of trace.jobs) counts.set(j.workload, (counts.get(j.workload) ?? 0) + 1);
    expect(Object.fromEntries(counts)).toEqual({
      resnet18: 11,
      sage: 15,
      gcn: 14,
      cyclegan: 74,
      vit: 38,
      openfoam: 18,
      a3c: 17,
      seq: 7,
      gpt2: 6,
    });
    const arrivals = trace.jobs.map((j) => j.arrivalSeconds);
    expect(arrivals).toEqual([...arrivals].sort((a, b) => a - b));
    expect(arrivals.at(-1)).toBe(229743);
  });

  it('names the file, the job key and the field of every bad value', () => {
    const json = JSON.parse(evaJson) as Record<
      string,
      { arrival_time: unknown; tasks: Record<string, { demand: { any: number[] } }> }
    >;
    (json['17'] as { tasks: Record<string, { demand: { any: number[] } }> }).tasks['17']!.demand.any[1] = -1;
    json['3']!.arrival_time = 'soon';
    (json['5'] as unknown as { duration: number }).duration = 1e12;
    try {
      parseEvaTrace(JSON.stringify(json), 'pai_200.json');
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      const message = (e as Error).message;
      expect(message).toMatch(/^pai_200\.json: /);
      expect(message).toContain('job 17: tasks.17.demand.any.1:');
      expect(message).toContain('job 3: arrival_time:');
      expect(message).toContain('job 5: duration: at most 31536000 s (365 days)');
    }
  });

  it('rejects invalid JSON, non-object roots and empty traces naming the file', () => {
    expect(() => parseEvaTrace('{"0": ', 't.json')).toThrow(/^t\.json: not valid JSON/);
    expect(() => parseEvaTrace('[]', 't.json')).toThrow(/^t\.json: \(root\): expected an object/);
    expect(() => parseEvaTrace('{}', 't.json')).toThrow(/t\.json: \(root\): the trace has no jobs/);
    expect(() => parseEvaTrace('{"a": {"name": "x"}}', 't.json')).toThrow(/job a: arrival_time:/);
  });
});

describe('Eva JSON traces: fields the engine relies on', () => {
  const base = (JSON.parse(evaJson) as Record<string, Record<string, unknown>>)['0'] as Record<
    string,
    unknown
  >;
  const task = (base.tasks as Record<string, Record<string, unknown>>)['0'] as Record<string, unknown>;
  const withJob = (job: Record<string, unknown>, taskOver: Record<string, unknown> = {}): string =>
    JSON.stringify({ a: { ...base, ...job, tasks: { '0': { ...task, ...taskOver } } } });
  const problemsOf = (text: string): string[] => {
    try {
      parseEvaTrace(text, 't.json');
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      return [...(e as ValidationError).problems];
    }
    throw new Error('expected a validation error');
  };

  it('refuses a duration that disagrees with total_iters / full_throughput', () => {
    expect(problemsOf(withJob({ duration: 1e-9 }))[0]).toMatch(
      /^job a: duration: 1e-9 s, but total_iters \/ full_throughput is 12430 s/,
    );
    expect(
      problemsOf(withJob({ duration: 100, total_iters: 26103, full_throughput: 26103 / (60 * 86_400) }))[0],
    ).toMatch(/^job a: duration: 100 s, but total_iters \/ full_throughput is 5184000 s/);
    // Eva's generators round iterations down: one iteration short of the duration is no disagreement.
    expect(
      parseEvaTrace(withJob({ duration: 10, total_iters: 1, full_throughput: 0.15 }), 't.json').jobs,
    ).toHaveLength(1);
  });

  it("allows a job of few long iterations one iteration above its running time, as Eva's numbers do", () => {
    // One iteration of an hour: Eva writes duration d with total_iters = floor(d / 3600) = 1 for d in [3600, 7200).
    const hourly = (duration: number): string =>
      withJob({ duration, total_iters: 1, full_throughput: 1 / 3600 });
    for (const duration of [3600, 3599, 5000, 7199, 7201])
      expect(parseEvaTrace(hourly(duration), 't.json').jobs, String(duration)).toHaveLength(1);
    // Within 1% below is accepted as before; further below, a minute or nothing, is a duration the run never keeps.
    expect(parseEvaTrace(hourly(3564), 't.json').jobs).toHaveLength(1);
    expect(problemsOf(hourly(60))).toEqual([
      'job a: duration: 60 s, but total_iters / full_throughput is 3600 s: the job runs for its iterations, and ' +
        'duration (its size for queue classes) must agree: within 1%, or as Eva writes them (total_iters = ' +
        'floor(duration × full_throughput)), to a second',
    ]);
    for (const duration of [1, 3500, 7202, 7300])
      expect(problemsOf(hourly(duration))[0], String(duration)).toMatch(/^job a: duration: /);
    // A single iteration of 40 days is no job of one second, nor is the same minute over a thousand iterations.
    expect(
      problemsOf(withJob({ duration: 1, total_iters: 1, full_throughput: 1 / (40 * 86_400) }))[0],
    ).toMatch(/^job a: duration: 1 s, but total_iters \/ full_throughput is 3456000 s/);
    expect(problemsOf(withJob({ duration: 60, total_iters: 1000, full_throughput: 1000 / 3600 }))[0]).toMatch(
      /^job a: duration: 60 s, but total_iters \/ full_throughput is 3600 s/,
    );
  });

  it('bounds delays as a job spec does, and the running time as a duration', () => {
    expect(problemsOf(withJob({ init_delay: 1e300 }))).toEqual([
      "job a: init_delay: at most 86400 s (a day), as a job spec's delays",
    ]);
    expect(problemsOf(withJob({}, { fetch_delay: 1e300 }))).toEqual([
      "job a: tasks.0.fetch_delay: at most 86400 s (a day), as a job spec's delays",
    ]);
    expect(problemsOf(withJob({}, { shm_size: 1e300 }))).toEqual([
      "job a: tasks.0.shm_size: at most 65536 GiB, as a job spec's memory",
    ]);
    expect(problemsOf(withJob({ full_throughput: 1e-300 }))[0]).toMatch(
      /^job a: total_iters: total_iters \/ full_throughput is 2\.6103e\+304 s at full throughput: at most 31536000 s/,
    );
  });

  it('refuses a job id or a key given twice, and keys the format does not have', () => {
    const job = JSON.stringify({ ...base });
    expect(problemsOf(`{"a": ${job}, "a": ${job}}`)).toEqual([
      '(root): job id "a" is given more than once (JSON keeps only the last, so the others would be lost)',
    ]);
    const twiceInTask = withJob({}).replace('"name":"node0"', '"name":"node0","name":"node1"');
    expect(problemsOf(twiceInTask)).toEqual([
      'job a: tasks.0: "name" is given more than once (JSON keeps only the last, so the others would be lost)',
    ]);
    expect(problemsOf(withJob({ bogus: 1 }))[0]).toMatch(/^job a: .*bogus/i);
    expect(problemsOf(withJob({}, { bogus: 1 }))[0]).toMatch(/^job a: tasks\.0: .*bogus/i);
  });

  it('keeps file order for jobs arriving together and for tasks, whatever their ids', () => {
    const job = JSON.stringify({ ...base, arrival_time: 0 });
    // JSON.parse lists integer-like keys first, in numeric order: "10" and "2" before "b", "2" before "10".
    const trace = parseEvaTrace(`{"b": ${job}, "10": ${job}, "2": ${job}}`, 't.json');
    expect(trace.jobs.map((j) => j.id)).toEqual(['b', '10', '2']);
    // Written by hand: a JS object (and so JSON.stringify) would put "0" first too.
    const tasks = `{"1": ${JSON.stringify({ ...task, name: 'worker' })}, "0": ${JSON.stringify({ ...task, name: 'ps' })}}`;
    const twoTasks = parseEvaTrace(
      JSON.stringify({ a: { ...base, tasks: 'TASKS' } }).replace('"TASKS"', tasks),
      't.json',
    );
    expect(twoTasks.jobs[0]?.tasks.map((t) => t.name)).toEqual(['worker', 'ps']);
  });

  it('reads a file that starts with a byte order mark, and tells a fleetwise trace given as Eva', () => {
    expect(parseEvaTrace(`\uFEFF${withJob({})}`, 't.json').jobs).toHaveLength(1);
    expect(problemsOf('{"format": "fleetwise-trace/v1", "jobs": []}')).toEqual([
      '(root): a fleetwise trace (format "fleetwise-trace/v1"), not an Eva one: give --format fleetwise',
    ]);
  });

  it('tells a fleetwise trace whose format is misspelled or missing by its format, not as Eva jobs', () => {
    const jobs = '"jobs": [{"id": "job-1"}]';
    expect(problemsOf(`{"format": "fleetwise", "name": "t", ${jobs}}`)).toEqual([
      'format: expected "fleetwise-trace/v1" (got "fleetwise"): the file has a fleetwise trace\'s jobs array, ' +
        'where an Eva trace maps job ids to jobs',
    ]);
    expect(problemsOf(`{"name": "t", ${jobs}}`)).toEqual([
      'format: expected "fleetwise-trace/v1" (missing): the file has a fleetwise trace\'s jobs array, where an Eva ' +
        'trace maps job ids to jobs',
    ]);
    expect(problemsOf('{"format": 1}')).toEqual([
      'format: expected "fleetwise-trace/v1" (got 1): an Eva trace maps job ids to jobs, and a fleetwise trace ' +
        'says its format',
    ]);
    // Jobs whose ids are "format" or "jobs" are Eva jobs still.
    const job = JSON.parse(withJob({})) as Record<string, unknown>;
    const named = JSON.stringify({ format: job['a'], jobs: job['a'] });
    expect(parseEvaTrace(named, 't.json').jobs.map((j) => j.id)).toEqual(['format', 'jobs']);
  });

  it('refuses a demand asking for nothing, naming the field', () => {
    expect(problemsOf(withJob({}, { demand: { any: [0, 0, 0] } }))).toEqual([
      'job a: tasks.0.demand.any: asks for nothing ([0, 0, 0]): a demand needs a positive GPU, vCPU or memory entry',
    ]);
  });
});

/** A two-node job as Eva's own multi-task workloads write it: every task is named `node0`. */
function twoNodeTrace(): string {
  const task = {
    name: 'node0',
    demand: { any: [1, 8, 30] },
    shm_size: 2,
    image_id: 3,
    fetch_delay: 1,
    build_image_delay: 10,
    kill_delay: 1,
    upload_delay: 1,
  };
  return JSON.stringify({
    '0': {
      name: 'two_node_Resnet18[0]',
      arrival_time: 0,
      duration: 1200,
      init_delay: 30,
      full_throughput: 2,
      total_iters: 2400,
      tasks: { '0': task, '1': task },
    },
  });
}

describe("Eva JSON traces with repeated task names (Eva's multi-task workloads)", () => {
  it('identifies the tasks by their keys and keeps one co-location key for the identical tasks', () => {
    const trace = parseEvaTrace(twoNodeTrace(), 'two_node.json');
    const tasks = trace.jobs[0]?.tasks ?? [];
    expect(tasks.map((t) => t.name)).toEqual(['0', '1']);
    expect(tasks.map((t) => t.key)).toEqual(['two_node_Resnet18[0]_node0', 'two_node_Resnet18[0]_node0']);
    const jobs = buildSimJobs(trace, loadCatalogFile());
    expect(jobs[0]?.taskIds).toEqual(['0/0', '0/1']);
  });

  it('fleetwise simulate runs such a trace to the end', async () => {
    ensureBuiltCli(['cli/main.ts', 'sim/run-worker.ts']);
    const dir = mkdtempSync(join(tmpdir(), 'fleetwise-two-node-'));
    try {
      const file = join(dir, 'two_node.json');
      writeFileSync(file, twoNodeTrace());
      const result = await runCli([
        'simulate',
        '--trace',
        file,
        '--scheduler',
        'eva',
        '--json',
        '--out',
        dir,
      ]);
      expect(result.stderr).not.toMatch(/duplicate task name/);
      expect(result.code).toBe(0);
      const runs = (JSON.parse(result.stdout) as { runs: { jobs: number; completedJobs?: number }[] }).runs;
      expect(runs[0]?.jobs).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
