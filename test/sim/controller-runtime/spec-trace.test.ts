import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../../src/cloud/catalog-file.js';
import { parseJobSpec, validateJobSpec } from '../../../src/controller/job-spec/parse.js';
import { MIN_TABLE_PERFORMANCE } from '../../../src/core/network-schema.js';
import { FLEETWISE_TRACE_FORMAT, fleetwiseTrace } from '../../../src/sim/traces/fleetwise-json.js';
import { expandTasks } from '../../../src/controller/job-spec/tasks.js';
import { ValidationError } from '../../../src/core/validation.js';
import { specFilesTrace, specTraceJob } from '../../../src/sim/controller-runtime/spec-trace.js';
import { traceJobSpec } from '../../../src/sim/controller-runtime/trace-specs.js';
import { loadTrace } from '../../../src/sim/traces/load.js';
import type { TraceJob } from '../../../src/world/trace.js';

const catalog = loadCatalogFile();
const example = (name: string): string => readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', name), 'utf8');

const tmp = mkdtempSync(join(tmpdir(), 'fleetwise-spec-trace-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A directory holding `files` (name → text). */
function directory(name: string, files: Record<string, string>): string {
  const dir = join(tmp, name);
  mkdirSync(dir);
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
  return dir;
}

function problemsOf(fn: () => unknown): { source: string; problems: readonly string[] } {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return { source: (e as ValidationError).source, problems: (e as ValidationError).problems };
  }
  throw new Error('expected a validation error');
}

describe('job specs as trace jobs', () => {
  it("keeps the controller's task names and co-location keys (replicas expanded) and the spec's delays", () => {
    const spec = parseJobSpec(example('resnet-ddp.yaml'), 'resnet-ddp.yaml', catalog);
    const job = specTraceJob(spec, { id: 'x', arrivalSeconds: 30, durationSeconds: 900 });
    const expanded = expandTasks(spec);
    expect(expanded.length).toBeGreaterThan(1);
    expect(job.tasks.map((t) => [t.name, t.workload])).toEqual(expanded.map((t) => [t.name, t.workloadKey]));
    expect(job).toMatchObject({
      id: 'x',
      name: spec.name,
      team: spec.team,
      arrivalSeconds: 30,
      durationSeconds: 900,
      initDelaySeconds: spec.checkpoint.initDelaySeconds ?? 0,
      restoreDelaySeconds: spec.checkpoint.restoreDelaySeconds ?? 0,
    });
  });

  it('writes a latency table a controller accepted below the floor at the floor, so the trace replays', () => {
    const below = {
      name: 'kv',
      team: 'infra',
      tasks: [
        { image: 'a', demand: [0, 1, 1] },
        { image: 'b', demand: [0, 1, 1] },
      ],
      network: {
        sensitivity: [
          [0, 1],
          [500, 0.005],
        ],
      },
    };
    const spec = validateJobSpec(below, 'archived spec of job-1', catalog, { accepted: true });
    const job = specTraceJob(spec, { id: 'job-1', arrivalSeconds: 0, durationSeconds: 600 });
    expect(job.network?.sensitivity).toEqual([
      [0, 1],
      [500, MIN_TABLE_PERFORMANCE],
    ]);
    const trace = fleetwiseTrace({ format: FLEETWISE_TRACE_FORMAT, jobs: [job] }, 'exported.json');
    expect(trace.jobs[0]?.network?.sensitivity).toEqual([
      [0, 1],
      [500, MIN_TABLE_PERFORMANCE],
    ]);
  });

  it('reads a directory with an arrivals index: arrivals, declared durations, keys', () => {
    const dir = directory('indexed', {
      'resnet.yaml': example('resnet.yaml'),
      'gpt2.yaml': example('gpt2.yaml'),
      'arrivals.yaml': 'resnet.yaml: 10m\ngpt2.yaml: 0\n',
      'README.md': 'not a spec',
    });
    const trace = loadTrace(dir, { format: 'specs', instanceCatalog: catalog });
    expect(trace.name).toBe('indexed');
    expect(trace.jobs.map((j) => [j.id, j.arrivalSeconds])).toEqual([
      ['gpt2.yaml', 0],
      ['resnet.yaml', 600],
    ]);
    const resnet = trace.jobs[1];
    expect(resnet).toMatchObject({ name: 'resnet18-cifar10', workload: 'resnet18', durationSeconds: 4408 });
    expect(resnet?.totalIterations).toBe(10010);
    expect(resnet?.tasks.map((t) => t.key)).toEqual(['resnet18']);
  });

  it('carries what the scheduler and the world read of a job: spot, checkpoint cadence, no-move window, value of time, success model', () => {
    const dir = directory('declared', {
      'resnet.yaml':
        example('resnet.yaml').replace('noMoveSeconds: 600', 'noMoveSeconds: 900') +
        '\nspot: never\nspotMaxDelayMinutes: 15\nvalueOfTimePerJobHour: 4\n' +
        'success:\n  kind: success\n  successProbability: 0.5\n  expectedSizeSeconds: 3600\n',
    });
    const [job] = loadTrace(dir, { format: 'specs', instanceCatalog: catalog }).jobs;
    expect(job).toMatchObject({
      spot: 'never',
      spotMaxDelaySeconds: 900,
      checkpointIntervalSeconds: 600, // the example's checkpoint.everySeconds
      noMoveSeconds: 900,
      valueOfTimePerHour: 4,
      success: { kind: 'success', successProbability: 0.5, expectedSizeSeconds: 3600 },
    });
    // The controller runtime submits it with the same declarations.
    const spec = traceJobSpec(job as TraceJob, new Map(), job?.checkpointIntervalSeconds ?? 0);
    expect(spec).toMatchObject({
      spot: 'never',
      spotMaxDelaySeconds: 900,
      noMoveSeconds: 900,
      valueOfTimePerJobHour: 4,
      checkpoint: { everySeconds: 600 },
      success: { kind: 'success', successProbability: 0.5 },
    });
  });

  it('reads an array spec as its jobs, arriving together with the index in their ids', () => {
    const dir = directory('array', {
      'sweep.yaml': `${example('resnet.yaml')}\narrayProperties: { size: 3 }\n`,
      'one.yaml': `${example('resnet.yaml')}\narrayProperties: { size: 3, index: 1 }\n`,
      'arrivals.yaml': 'sweep.yaml: 5m\none.yaml: 0\n',
    });
    const trace = loadTrace(dir, { format: 'specs', instanceCatalog: catalog });
    expect(trace.jobs.map((j) => [j.id, j.arrivalSeconds, j.durationSeconds])).toEqual([
      ['one.yaml', 0, 4408],
      ['sweep.yaml[0]', 300, 4408],
      ['sweep.yaml[1]', 300, 4408],
      ['sweep.yaml[2]', 300, 4408],
    ]);
  });

  it("holds each job of a SEQUENTIAL array for the one before it, and refuses N_TO_N (a controller's ids)", () => {
    const sequential = directory('sequential', {
      'steps.yaml': `${example('resnet.yaml')}\narrayProperties: { size: 3 }\ndependsOn: [{ type: SEQUENTIAL }]\n`,
    });
    const trace = loadTrace(sequential, { format: 'specs', instanceCatalog: catalog });
    expect(trace.jobs.map((j) => [j.id, j.dependsOn ?? []])).toEqual([
      ['steps.yaml[0]', []],
      ['steps.yaml[1]', ['steps.yaml[0]']],
      ['steps.yaml[2]', ['steps.yaml[1]']],
    ]);
    const paired = directory('paired', {
      'pairs.yaml': `${example('resnet.yaml')}\narrayProperties: { size: 3 }\ndependsOn: [{ jobId: job-4, type: N_TO_N }]\n`,
    });
    expect(
      problemsOf(() => loadTrace(paired, { format: 'specs', instanceCatalog: catalog })).problems,
    ).toEqual([expect.stringMatching(/^dependsOn: an N_TO_N dependency is not simulated/)]);
  });

  it('without an index: name order, --arrival-gap-seconds apart; --jobs cuts it', () => {
    const dir = directory('gapped', {
      'b.yaml': example('resnet.yaml'),
      'a.yaml': example('gpt2.yaml'),
      'c.json': JSON.stringify(parseJobSpec(example('graphsage.yaml'), 'g', catalog)),
    });
    const trace = loadTrace(dir, { format: 'specs', instanceCatalog: catalog, arrivalGapSeconds: 120 });
    expect(trace.jobs.map((j) => [j.id, j.arrivalSeconds])).toEqual([
      ['a.yaml', 0],
      ['b.yaml', 120],
      ['c.json', 240],
    ]);
    expect(loadTrace(dir, { format: 'specs', instanceCatalog: catalog, jobs: 2 }).jobs).toHaveLength(2);
    expect(
      loadTrace(dir, { format: 'specs', instanceCatalog: catalog }).jobs.map((j) => j.arrivalSeconds),
    ).toEqual([0, 0, 0]);
  });

  it('names the file and field of a spec without expectedDurationSeconds, and of every invalid spec', () => {
    const noDuration = example('resnet.yaml').replace(/^expectedDurationSeconds:.*$/m, '');
    const one = problemsOf(() =>
      specFilesTrace(
        [{ name: 'r.yaml', path: 'jobs/r.yaml', text: noDuration }],
        new Map([['r.yaml', 0]]),
        catalog,
        'jobs',
      ),
    );
    expect(one.source).toBe('jobs/r.yaml');
    expect(one.problems[0]).toMatch(/^expectedDurationSeconds: required to simulate the job/);

    const dir = directory('bad', {
      'a.yaml': noDuration,
      'b.yaml': example('gpt2.yaml').replace(/^team:.*$/m, 'team: Not A Name'),
      'c.yaml': example('resnet.yaml'),
    });
    const all = problemsOf(() => loadTrace(dir, { format: 'specs', instanceCatalog: catalog }));
    expect(all.source).toBe('bad');
    expect(all.problems).toEqual([
      expect.stringMatching(/a\.yaml: expectedDurationSeconds: required/),
      expect.stringMatching(/b\.yaml: team: .*\(line \d+\)/),
    ]);
  });

  it('refuses what it cannot simulate: dependsOn, and a run limit shorter than the expected run', () => {
    const resnet = example('resnet.yaml');
    const expected = /^expectedDurationSeconds: (.*)$/m.exec(resnet)?.[1];
    expect(expected).toBeDefined();
    const dir = directory('unsimulated', {
      'after.yaml': `${resnet}dependsOn: [job-1]\n`,
      'short.yaml': `${resnet}maxRunSeconds: 60\n`,
      'roomy.yaml': `${resnet}maxRunSeconds: 365d\n`,
    });
    const refused = problemsOf(() => loadTrace(dir, { format: 'specs', instanceCatalog: catalog }));
    expect(refused.problems).toEqual([
      expect.stringMatching(/after\.yaml: dependsOn: not simulated .*give the dependent job a later arrival/),
      expect.stringMatching(
        /short\.yaml: maxRunSeconds: 60 s is shorter than expectedDurationSeconds \(\d+ s\): the job would be stopped/,
      ),
    ]);
  });

  it('refuses an empty directory, a file, a bad index, and the gap next to an index', () => {
    const empty = directory('empty', {});
    expect(
      problemsOf(() => loadTrace(empty, { format: 'specs', instanceCatalog: catalog })).problems[0],
    ).toMatch(/no job spec files .* \(it is empty\)/);
    const onlyNotes = directory('notes', { 'notes.txt': 'x' });
    expect(problemsOf(() => loadTrace(onlyNotes, { format: 'specs' })).problems[0]).toMatch(
      /it has notes\.txt/,
    );
    const file = join(tmp, 'file.yaml');
    writeFileSync(file, example('resnet.yaml'));
    expect(problemsOf(() => loadTrace(file, { format: 'specs' })).problems[0]).toMatch(/a directory/);
    const badIndex = directory('bad-index', {
      'a.yaml': example('resnet.yaml'),
      'arrivals.yaml': 'b.yaml: 0\n',
    });
    const bad = problemsOf(() => loadTrace(badIndex, { format: 'specs', instanceCatalog: catalog }));
    expect(bad.source).toBe(join(badIndex, 'arrivals.yaml'));
    expect(bad.problems).toEqual([
      'b.yaml: no such job spec file in the directory (it has a.yaml)',
      'a.yaml: missing: every job spec file needs an arrival',
    ]);
    const indexed = directory('both', { 'a.yaml': example('resnet.yaml'), 'arrivals.yaml': 'a.yaml: 0\n' });
    expect(problemsOf(() => loadTrace(indexed, { format: 'specs', arrivalGapSeconds: 5 })).source).toBe(
      '--arrival-gap-seconds',
    );
    expect(() => loadTrace(undefined, { format: 'specs' })).toThrow(/needs --trace DIR/);
    expect(() => loadTrace(undefined, { format: 'eva', arrivalGapSeconds: 5 })).toThrow(/--format specs/);
  });
});
