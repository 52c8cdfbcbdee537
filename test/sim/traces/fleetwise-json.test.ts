import { describe, expect, it } from 'vitest';
import { MAX_DURATION_RULE, MAX_DURATION_SECONDS } from '../../../src/core/duration.js';
import { MAX_VALUE_OF_TIME_PER_JOB_HOUR } from '../../../src/core/model.js';
import { MAX_SPOT_MAX_DELAY_MINUTES } from '../../../src/core/spot.js';
import { ValidationError } from '../../../src/core/validation.js';
import { checkpointSchema, jobSpecSchema } from '../../../src/controller/job-spec/schema.js';
import {
  FLEETWISE_TRACE_FORMAT,
  isFleetwiseTraceJson,
  isFleetwiseTraceText,
  parseFleetwiseTrace,
  type FleetwiseTraceDocument,
} from '../../../src/sim/traces/fleetwise-json.js';
import { evaJson } from './fixtures.js';

const doc = (jobs: unknown[]): string => JSON.stringify({ format: FLEETWISE_TRACE_FORMAT, name: 't', jobs });

const job = (over: Record<string, unknown> = {}) => ({
  id: 'job-1',
  name: 'train',
  arrivalSeconds: 0,
  durationSeconds: 600,
  tasks: [{ name: 'trainer', workload: 'resnet18', demand: { any: [1, 4, 24] as [number, number, number] } }],
  ...over,
});

function problemsOf(text: string): string[] {
  try {
    parseFleetwiseTrace(text, 'history.json');
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    expect((e as ValidationError).source).toBe('history.json');
    return [...(e as ValidationError).problems];
  }
  throw new Error('expected a validation error');
}

describe('fleetwise JSON traces', () => {
  it('bounds the delays as a job spec does, and refuses a key given twice', () => {
    expect(problemsOf(doc([job({ initDelaySeconds: 1e300 })]))).toEqual([
      "jobs.0.initDelaySeconds: at most 86400 s (a day), as a job spec's delays",
    ]);
    expect(problemsOf(doc([job({ restoreDelaySeconds: 86_401 })]))[0]).toMatch(
      /^jobs\.0\.restoreDelaySeconds: at most 86400 s/,
    );
    const twice = `{"format": "${FLEETWISE_TRACE_FORMAT}", "jobs": [{"id": "a", "id": "b", "name": "x", "arrivalSeconds": 0, "durationSeconds": 60, "tasks": [{"name": "t", "workload": "w", "demand": {"any": [1, 1, 1]}}]}]}`;
    expect(problemsOf(twice)).toEqual([
      'jobs.0: the key "id" is given more than once (JSON keeps only the last, so the others would be lost)',
    ]);
  });

  it("bounds a job spec's declared times and value of time as the spec does, at the bounds and past them", () => {
    const atBounds = {
      checkpointIntervalSeconds: MAX_DURATION_SECONDS,
      noMoveSeconds: MAX_DURATION_SECONDS,
      valueOfTimePerJobHour: MAX_VALUE_OF_TIME_PER_JOB_HOUR,
      spotMaxDelaySeconds: MAX_SPOT_MAX_DELAY_MINUTES * 60,
    };
    const [read] = parseFleetwiseTrace(doc([job(atBounds)]), 'history.json').jobs;
    expect(read?.checkpointIntervalSeconds).toBe(MAX_DURATION_SECONDS);
    expect(read?.noMoveSeconds).toBe(MAX_DURATION_SECONDS);
    expect(read?.valueOfTimePerHour).toBe(MAX_VALUE_OF_TIME_PER_JOB_HOUR);
    expect(read?.spotMaxDelaySeconds).toBe(MAX_SPOT_MAX_DELAY_MINUTES * 60);
    // The job spec's own schema draws the same lines.
    const spec = jobSpecSchema.shape;
    expect(spec.noMoveSeconds.safeParse(MAX_DURATION_SECONDS).success).toBe(true);
    expect(spec.noMoveSeconds.safeParse(MAX_DURATION_SECONDS + 1).success).toBe(false);
    expect(checkpointSchema.shape.everySeconds.safeParse(MAX_DURATION_SECONDS + 1).success).toBe(false);
    expect(spec.valueOfTimePerJobHour.safeParse(MAX_VALUE_OF_TIME_PER_JOB_HOUR).success).toBe(true);
    expect(spec.valueOfTimePerJobHour.safeParse(MAX_VALUE_OF_TIME_PER_JOB_HOUR + 0.01).success).toBe(false);
    expect(spec.spotMaxDelayMinutes.safeParse(MAX_SPOT_MAX_DELAY_MINUTES).success).toBe(true);
    expect(spec.spotMaxDelayMinutes.safeParse(MAX_SPOT_MAX_DELAY_MINUTES + 1).success).toBe(false);
    expect(
      problemsOf(
        doc([
          job({
            checkpointIntervalSeconds: MAX_DURATION_SECONDS + 1,
            noMoveSeconds: 1e300,
            valueOfTimePerJobHour: MAX_VALUE_OF_TIME_PER_JOB_HOUR + 0.01,
            spotMaxDelaySeconds: 1e308,
          }),
        ]),
      ),
    ).toEqual([
      `jobs.0.spotMaxDelaySeconds: at most a week (604800 s), as a job spec's spotMaxDelayMinutes`,
      `jobs.0.checkpointIntervalSeconds: ${MAX_DURATION_RULE}, as a job spec's checkpoint.everySeconds`,
      `jobs.0.noMoveSeconds: ${MAX_DURATION_RULE}, as a job spec's noMoveSeconds`,
      `jobs.0.valueOfTimePerJobHour: at most ${MAX_VALUE_OF_TIME_PER_JOB_HOUR} ($ per hour), as a job spec's valueOfTimePerJobHour`,
    ]);
  });

  it('refuses a demand that asks for nothing, naming the field', () => {
    const zero = job({
      tasks: [{ name: 'trainer', workload: 'resnet18', demand: { any: [0, 0, 0] } }],
    });
    expect(problemsOf(doc([zero]))[0]).toMatch(
      /^jobs\.0\.tasks\.0\.demand\.any: asks for nothing \(\[0, 0, 0\]\)/,
    );
  });

  it('maps jobs as the controller would: keys, delays, throughput, in arrival order', () => {
    const document: FleetwiseTraceDocument = {
      format: FLEETWISE_TRACE_FORMAT,
      name: 'history',
      jobs: [
        job({ id: 'late', arrivalSeconds: 300, durationSeconds: 120, team: 'ml' }),
        {
          id: 'ddp',
          name: 'resnet-ddp',
          workload: 'resnet18[2]',
          arrivalSeconds: 0,
          durationSeconds: 1000,
          totalIterations: 4000,
          initDelaySeconds: 80,
          restoreDelaySeconds: 5,
          successful: false,
          tasks: [
            {
              name: 'w-0',
              workload: 'resnet18_w',
              image: 'img:1',
              demand: { p3: [1, 8, 32] },
              shmSizeGiB: 4,
            },
            {
              name: 'w-1',
              workload: 'resnet18_w',
              image: 'img:1',
              demand: { p3: [1, 8, 32] },
              shmSizeGiB: 4,
            },
          ],
        },
      ],
    };
    const trace = parseFleetwiseTrace(JSON.stringify(document), 'history.json');
    expect(trace.name).toBe('history');
    expect(trace.jobs.map((j) => j.id)).toEqual(['ddp', 'late']);
    const [ddp, late] = trace.jobs;
    expect(ddp).toMatchObject({
      workload: 'resnet18', // the interference identity without the `[k]` suffix
      durationSeconds: 1000,
      totalIterations: 4000,
      fullThroughput: 4,
      initDelaySeconds: 80,
      successful: false,
    });
    expect(ddp?.tasks[1]).toEqual({
      name: 'w-1',
      key: 'resnet18_w',
      demand: { p3: [1, 8, 32] },
      shmSizeGiB: 4,
      imageId: 'img:1',
      fetchDelaySeconds: 5,
      buildImageDelaySeconds: 0,
      killDelaySeconds: 0,
      uploadDelaySeconds: 5,
    });
    // Without totalIterations: one iteration a second, so iterations / throughput is the duration.
    expect(late).toMatchObject({ team: 'ml', totalIterations: 120, fullThroughput: 1, workload: 'resnet18' });
    expect(late?.tasks[0]).toMatchObject({ imageId: 'resnet18', shmSizeGiB: 0, fetchDelaySeconds: 0 });
  });

  it('names the job and field of every problem', () => {
    const { durationSeconds: _d, ...withoutDuration } = job();
    expect(problemsOf(doc([withoutDuration]))).toEqual([
      expect.stringMatching(/^jobs\.0\.durationSeconds: /),
    ]);
    expect(problemsOf(doc([job(), job()]))).toEqual(['jobs.1.id: duplicate job id job-1']);
    expect(problemsOf(doc([job({ arrivalSeconds: -1 })]))[0]).toMatch(/^jobs\.0\.arrivalSeconds: /);
    // Bounded, so that a typo cannot keep a simulation running for ever.
    expect(problemsOf(doc([job({ durationSeconds: 1e9 })]))).toEqual([
      "jobs.0.durationSeconds: at most 31536000 s (365 days), as a job spec's expectedDurationSeconds",
    ]);
    expect(problemsOf(doc([job({ arrivalSeconds: 1e300 })]))).toEqual([
      'jobs.0.arrivalSeconds: at most 315360000 s (ten years)',
    ]);
    expect(problemsOf(doc([job({ tasks: [] })]))[0]).toMatch(/jobs\.0\.tasks: a job needs at least one task/);
    expect(problemsOf(doc([job({ durationFrom: 'guessed' })]))[0]).toMatch(/^jobs\.0\.durationFrom: /);
    expect(problemsOf(doc([job({ arrival: 3 })]))[0]).toMatch(/arrival/);
    expect(problemsOf(doc([]))).toEqual(['jobs: the trace has no jobs']);
    expect(problemsOf(JSON.stringify({ format: 'eva', jobs: [job()] }))[0]).toMatch(
      /^format: expected "fleetwise-trace\/v1"/,
    );
    expect(problemsOf('{')[0]).toMatch(/not valid JSON/);
  });

  it('keeps dependencies on jobs listed before, and names what cannot be replayed', () => {
    const two = (dependsOn: unknown, first: Record<string, unknown> = {}) =>
      doc([job(first), job({ id: 'job-2', arrivalSeconds: 60, dependsOn })]);
    expect(parseFleetwiseTrace(two(['job-1'])).jobs[1]?.dependsOn).toEqual(['job-1']);
    expect(problemsOf(two(['job-9']))).toEqual([
      'jobs.1.dependsOn.0: job-9 is not a job listed before this one (a dependency is submitted before its dependents)',
    ]);
    expect(problemsOf(two(['job-1'], { arrivalSeconds: 90 }))).toEqual([
      'jobs.1.dependsOn.0: job-1 arrives after this job (at 90 s)',
    ]);
    expect(problemsOf(two(['job-1'], { team: 'vision' }))).toEqual([
      "jobs.1.dependsOn.0: job-1 is a job of team vision: a job waits only for its own team's",
    ]);
    expect(problemsOf(two(['job-1'], { successful: false }))).toEqual([
      'jobs.1.dependsOn.0: job-1 fails in the trace (successful: false), so this job could never start',
    ]);
    expect(problemsOf(two([]))[0]).toMatch(/^jobs\.1\.dependsOn: /);
    expect(problemsOf(two(['job-1', 'job-1']))).toEqual(['jobs.1.dependsOn: names a job twice']);
    expect(problemsOf(doc([job({ dependsOn: ['job-1'] })]))[0]).toMatch(
      /^jobs\.0\.dependsOn\.0: job-1 is not a job listed before/,
    );
  });

  it('tells its documents from Eva traces by their format field', () => {
    expect(isFleetwiseTraceJson({ format: FLEETWISE_TRACE_FORMAT, jobs: [] })).toBe(true);
    expect(isFleetwiseTraceJson({ '0': { name: 'resnet18[0]' } })).toBe(false);
    expect(isFleetwiseTraceJson([])).toBe(false);
  });

  it('tells an Eva trace given as fleetwise to give --format eva, not of its job ids as unknown keys', () => {
    expect(problemsOf(evaJson)).toEqual(['(root): an Eva trace (job ids → jobs): give --format eva']);
    expect(problemsOf(`\uFEFF{"7": {"name": "vit[0]", "total_iters": 10}, "8": {}}`)).toEqual([
      '(root): an Eva trace (job ids → jobs): give --format eva',
    ]);
    // Without a field of Eva's jobs, or beside a format or jobs key, the document's own problems are listed.
    expect(problemsOf('{"7": {"name": "vit[0]"}}')).not.toContain(
      '(root): an Eva trace (job ids → jobs): give --format eva',
    );
    expect(problemsOf('{"jobs": {"7": {"total_iters": 10}}}')[0]).toMatch(/^format: /);
  });

  it('reads a file that starts with a byte order mark, and tells it from an Eva trace', () => {
    const text = `\uFEFF${doc([job()])}`;
    expect(parseFleetwiseTrace(text, 'history.json').jobs).toHaveLength(1);
    expect(isFleetwiseTraceText(text)).toBe(true);
    expect(isFleetwiseTraceText('\uFEFF{"0": {}}')).toBe(false);
    expect(isFleetwiseTraceText('not json')).toBe(false);
  });

  it("refuses a network root that names none of the job's tasks", () => {
    const network = { sensitivity: 'memcached', pattern: 'star', root: 'nope' };
    expect(problemsOf(doc([job({ network })]))).toEqual([
      'jobs.0.network.root: no task named nope (tasks: trainer)',
    ]);
    expect(parseFleetwiseTrace(doc([job({ network: { ...network, root: 'trainer' } })])).jobs).toHaveLength(
      1,
    );
  });
});
