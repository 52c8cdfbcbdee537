import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import {
  parseJobSpec,
  readSpecText,
  validateJobSpec,
  validateSpecText,
} from '../../src/controller/job-spec/parse.js';
import { jobSpecSchema, taskSchema } from '../../src/controller/job-spec/schema.js';
import { arraySubmissionSize, JOB_SPEC_LIMITS } from '../../src/controller/job-spec/spec.js';
import { exitCodeMatches, retryVerdict } from '../../src/controller/job-spec/retry.js';
import { writtenJobSpec } from '../../src/controller/job-spec/written-form.js';
import { derivedWorkload, expandTasks } from '../../src/controller/job-spec/tasks.js';
import { ValidationError } from '../../src/core/validation.js';
import { PriceBook } from '../../src/scheduler/reservation-price.js';

const catalog = loadCatalogFile();
const EXAMPLES_DIR = join(PROJECT_ROOT, 'examples', 'jobs');

const MINIMAL = `
name: tiny
team: ml
tasks:
  - image: python:3.12-slim
    command: [python, -c, "print(1)"]
    demand: { any: [0, 1, 1] }
`;

function problemsOf(text: string): readonly string[] {
  try {
    parseJobSpec(text, 'spec.yaml', catalog);
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    const err = e as ValidationError;
    expect(err.source).toBe('spec.yaml');
    return err.problems;
  }
  throw new Error('expected the spec to be rejected');
}

describe('examples/jobs', () => {
  const files = readdirSync(EXAMPLES_DIR).filter((f) => /\.(ya?ml|json)$/.test(f));

  it('has the four required examples', () => {
    expect(files).toEqual(
      expect.arrayContaining(['resnet.yaml', 'gpt2.yaml', 'graphsage.yaml', 'openfoam.yaml']),
    );
  });

  it.each(files)('%s parses against the bundled catalog', (file) => {
    const spec = parseJobSpec(readFileSync(join(EXAMPLES_DIR, file), 'utf8'), file, catalog);
    expect(spec.tasks.length).toBeGreaterThan(0);
  });

  it('each example lands on the family it is written for (cheapest host, Eva reservation price)', () => {
    const book = new PriceBook(catalog);
    const cheapest = (file: string): string => {
      const spec = parseJobSpec(readFileSync(join(EXAMPLES_DIR, file), 'utf8'), file, book);
      return book.minType((spec.tasks[0] as (typeof spec.tasks)[0]).demand)?.name ?? 'none';
    };
    expect(cheapest('resnet.yaml')).toBe('p3.2xlarge');
    expect(cheapest('gpt2.yaml')).toBe('p3.8xlarge');
    expect(cheapest('graphsage.yaml')).toBe('r7i.2xlarge');
    expect(cheapest('openfoam.yaml')).toBe('c7i.2xlarge');
  });

  it('openfoam keeps its per-family demand and resnet its any demand', () => {
    const foam = parseJobSpec(
      readFileSync(join(EXAMPLES_DIR, 'openfoam.yaml'), 'utf8'),
      'openfoam.yaml',
      catalog,
    );
    expect(foam.tasks[0]?.demand).toEqual({ p3: [0, 8, 8], c7i: [0, 6, 8], r7i: [0, 6, 8] });
    expect(foam.checkpoint.signal).toBe('SIGUSR1');
    const resnet = parseJobSpec(
      readFileSync(join(EXAMPLES_DIR, 'resnet.yaml'), 'utf8'),
      'resnet.yaml',
      catalog,
    );
    expect(resnet.tasks[0]?.demand).toEqual({ any: [1, 4, 24] });
    expect(resnet.tasks[0]?.env).toEqual({ PYTHONUNBUFFERED: '1', DATA_LOADER_WORKERS: '3' });
    expect(resnet.totalIterations).toBe(10010);
    expect(resnet.checkpoint.initDelaySeconds).toBe(80);
  });
});

describe('parseJobSpec: accepted specs', () => {
  it('fills defaults: SIGTERM, 60 s timeout, one replica, 1 GiB shm, empty env and queue, derived workload', () => {
    const spec = parseJobSpec(MINIMAL, 'tiny.yaml', catalog);
    expect(spec.checkpoint).toEqual({ signal: 'SIGTERM', timeoutSeconds: 60 });
    expect(spec.queue).toEqual({});
    const task = spec.tasks[0];
    expect(task?.name).toBe('task-0');
    expect(task?.replicas).toBe(1);
    expect(task?.shmSizeGiB).toBe(1);
    expect(task?.env).toEqual({});
    expect(task?.workload).toMatch(/^python-[0-9a-f]{8}$/);
  });

  it("defaults shmSizeGiB to 1 GiB, or to the task's smallest memory demand when that is less", () => {
    // A default the spec never wrote must not be what refuses it.
    const shmOf = (demand: string): number | undefined =>
      parseJobSpec(MINIMAL.replace('{ any: [0, 1, 1] }', demand), 'tiny.yaml', catalog).tasks[0]?.shmSizeGiB;
    expect(shmOf('{ any: [0, 0.5, 0.25] }')).toBe(0.25);
    expect(shmOf('{ any: [0, 1, 4] }')).toBe(1);
    expect(shmOf('{ c7i: [0, 1, 4], r7i: [0, 1, 0.5] }')).toBe(0.5);
    // Written, it is checked against the demand as before.
    expect(
      problemsOf(
        MINIMAL.replace('any: [0, 1, 1]', 'any: [0, 0.5, 0.25]').replace(
          'demand:',
          'shmSizeGiB: 0.5\n    demand:',
        ),
      ),
    ).toEqual([
      expect.stringMatching(
        /^tasks\.0\.shmSizeGiB: 0\.5 GiB of shared memory exceeds the task's 0\.25 GiB memory demand on any/,
      ),
    ]);
  });

  it('accepts JSON text and the vector shorthand for any', () => {
    const json = JSON.stringify({
      name: 'j',
      team: 't',
      tasks: [{ image: 'busybox', command: ['true'], demand: [0, 2, 4] }],
    });
    expect(parseJobSpec(json, 'j.json', catalog).tasks[0]?.demand).toEqual({ any: [0, 2, 4] });
  });

  it('accepts build as a directory string or an object, and a PriceBook instead of a catalog', () => {
    const spec = parseJobSpec(
      `name: b\nteam: t\ntasks:\n  - build: ./ctx\n    demand: [0, 1, 1]\n  - build: { context: ./ctx, dockerfile: gpu.Dockerfile }\n    demand: [0, 1, 1]\n`,
      'b.yaml',
      new PriceBook(catalog),
    );
    expect(spec.tasks.map((t) => t.build)).toEqual([
      { context: './ctx' },
      { context: './ctx', dockerfile: 'gpu.Dockerfile' },
    ]);
    expect(spec.tasks[0]?.workload).not.toBe(spec.tasks[1]?.workload);
  });

  it('keeps the queue section open for the queue layer', () => {
    const spec = parseJobSpec(
      `${MINIMAL}queue: { class: batch, priority: 3, stages: [a, b], deadline: '2h' }\n`,
      's',
      catalog,
    );
    expect(spec.queue).toEqual({ class: 'batch', priority: 3, stages: ['a', 'b'], deadline: '2h' });
  });

  it('validates a parsed object (API body) the same way, without line numbers', () => {
    expect(() => validateJobSpec({ name: 'x', team: 't', tasks: [] }, 'POST /jobs', catalog)).toThrow(
      'POST /jobs: tasks: a job needs at least one task',
    );
  });

  it('expands replicas into gang tasks sharing one co-location key', () => {
    const spec = parseJobSpec(
      `name: g\nteam: t\nworkload: ddp\ntasks:\n  - name: ps\n    image: a\n    demand: [0, 2, 4]\n  - name: worker\n    replicas: 3\n    image: a\n    demand: [1, 4, 24]\n`,
      'g.yaml',
      catalog,
    );
    const tasks = expandTasks(spec);
    expect(tasks.map((t) => [t.index, t.name, t.workloadKey])).toEqual([
      [0, 'ps', 'ddp_ps'],
      [1, 'worker-0', 'ddp_worker'],
      [2, 'worker-1', 'ddp_worker'],
      [3, 'worker-2', 'ddp_worker'],
    ]);
  });

  it('derives the workload key from image/build and command only (not env), deterministically', () => {
    const a = derivedWorkload({ image: 'ghcr.io/x/trainer:1.2@sha256:abc', command: ['python', 'a.py'] });
    expect(a).toMatch(/^trainer-[0-9a-f]{8}$/);
    expect(derivedWorkload({ image: 'ghcr.io/x/trainer:1.2@sha256:abc', command: ['python', 'a.py'] })).toBe(
      a,
    );
    expect(
      derivedWorkload({ image: 'ghcr.io/x/trainer:1.2@sha256:abc', command: ['python', 'b.py'] }),
    ).not.toBe(a);
    expect(derivedWorkload({ build: { context: './models/gnn/' }, command: [] })).toMatch(/^gnn-/);
  });

  it('accepts exactly the demands some catalog type can host (property)', () => {
    const book = new PriceBook(catalog);
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10 }),
        fc.integer({ min: 1, max: 220 }),
        fc.integer({ min: 0, max: 1600 }),
        (gpus, vcpus, memoryGiB) => {
          const text = `name: p\nteam: t\ntasks:\n  - image: a\n    shmSizeGiB: 0\n    demand: [${gpus}, ${vcpus}, ${memoryGiB}]\n`;
          const hostable = book.minType({ any: [gpus, vcpus, memoryGiB] }) !== undefined;
          let accepted = true;
          try {
            parseJobSpec(text, 'p.yaml', book);
          } catch (e) {
            accepted = false;
            expect((e as ValidationError).problems).toHaveLength(1);
            expect((e as ValidationError).problems[0]).toMatch(/^tasks\.0\.demand: no instance type/);
          }
          expect(accepted).toBe(hostable);
        },
      ),
      { numRuns: 200, seed: 7 },
    );
  });
});

describe('parseJobSpec: rejected specs name the field and the reason', () => {
  const cases: readonly (readonly [string, string, RegExp])[] = [
    ['a typo in a top-level field', `${MINIMAL}nmae: x\n`, /^nmae: unknown field, did you mean name\?/],
    [
      'an unknown checkpoint field',
      `${MINIMAL}checkpoint: { timeout: 30 }\n`,
      /^checkpoint\.timeout: unknown field, did you mean timeoutSeconds\?/,
    ],
    [
      'an unknown task field',
      MINIMAL.replace('command:', 'comand:'),
      /^tasks\.0\.comand: unknown field, did you mean command\?/,
    ],
    [
      'a demand vector of two numbers',
      MINIMAL.replace('any: [0, 1, 1]', 'p3: [1, 4]'),
      /^tasks\.0\.demand\.p3: expected \[gpus, vcpus, memoryGiB\] with 3 non-negative numbers \(line 7\)$/,
    ],
    [
      'a negative memory demand',
      MINIMAL.replace('[0, 1, 1]', '[0, 1, -2]'),
      /^tasks\.0\.demand\.any: expected \[gpus, vcpus, memoryGiB\] with 3 non-negative numbers/,
    ],
    [
      'a fractional GPU',
      MINIMAL.replace('[0, 1, 1]', '[0.5, 1, 1]'),
      /^tasks\.0\.demand\.any: gpus must be a whole number/,
    ],
    ['zero vCPUs', MINIMAL.replace('[0, 1, 1]', '[1, 0, 1]'), /^tasks\.0\.demand\.any: vcpus must be > 0/],
    [
      'a family the catalog lacks',
      MINIMAL.replace('any: [0, 1, 1]', 'p4: [1, 4, 24]'),
      /^tasks\.0\.demand\.p4: family p4 is not in the us-east-1 catalog/,
    ],
    [
      'a demand no type can host',
      MINIMAL.replace('[0, 1, 1]', '[9, 8, 64]'),
      /^tasks\.0\.demand: no instance type in the us-east-1 catalog can host this task \(p3 needs \[9 GPU, 8 vCPU, 64 GiB\], largest p3\.16xlarge has \[8 GPU, 64 vCPU, 488 GiB\]/,
    ],
    [
      'neither image, build nor command',
      MINIMAL.replace('image: python:3.12-slim', 'shmSizeGiB: 1').replace(/ {4}command: .*\n/, ''),
      /^tasks\.0: needs image .* or build .*, or, for the process executor, a command/,
    ],
    [
      'both image and build',
      MINIMAL.replace('image: python:3.12-slim', 'image: a\n    build: ./b'),
      /^tasks\.0: give either image or build, not both/,
    ],
    [
      'a name with spaces and capitals',
      MINIMAL.replace('name: tiny', 'name: My Job'),
      /^name: lowercase letters, digits/,
    ],
    ['a missing team', MINIMAL.replace('team: ml\n', ''), /^team: required \(string\)/],
    [
      'a signal that cannot be caught',
      `${MINIMAL}checkpoint: { signal: SIGKILL }\n`,
      /^checkpoint\.signal: Invalid option/,
    ],
    [
      'a reserved env name',
      MINIMAL.replace('command:', 'env: { FLEETWISE_TASK: x }\n    command:'),
      /^tasks\.0\.env\.FLEETWISE_TASK: names starting with FLEETWISE_ are set by the worker/,
    ],
    [
      'a command given as one string',
      MINIMAL.replace('[python, -c, "print(1)"]', 'python train.py'),
      /^tasks\.0\.command: expected a list of strings/,
    ],
    [
      'shared memory above the memory demand',
      MINIMAL.replace('command:', 'shmSizeGiB: 2\n    command:'),
      /^tasks\.0\.shmSizeGiB: 2 GiB of shared memory exceeds the task's 1 GiB memory demand on any/,
    ],
    [
      'duplicate task names',
      `name: d\nteam: t\ntasks:\n  - { name: a, image: x, demand: [0, 1, 1] }\n  - { name: a, image: x, demand: [0, 1, 1] }\n`,
      /^tasks\.1\.name: duplicate task name a \(also tasks\.0\)/,
    ],
    [
      'more than 64 tasks after replicas',
      `name: d\nteam: t\ntasks:\n  - { name: a, image: x, replicas: 40, demand: [0, 1, 1] }\n  - { name: b, image: x, replicas: 40, demand: [0, 1, 1] }\n`,
      /^tasks: 80 tasks after replicas, at most 64 per job/,
    ],
    [
      'a negative noMoveSeconds',
      `${MINIMAL}noMoveSeconds: -5\n`,
      /^noMoveSeconds: must be 0 seconds or more/,
    ],
    [
      'a negative value of time',
      `${MINIMAL}valueOfTimePerJobHour: -1\n`,
      /^valueOfTimePerJobHour: must be ≥ 0 \(\$ per hour of completion time\)/,
    ],
    [
      'a value of time above the bound',
      `${MINIMAL}valueOfTimePerJobHour: 20000\n`,
      /^valueOfTimePerJobHour: must be ≤ 10000 \(\$ per hour\)/,
    ],
    [
      'a duration in words',
      `${MINIMAL}expectedDurationSeconds: half an hour\n`,
      /^expectedDurationSeconds: expected seconds or a duration such as 90s, 30m/,
    ],
    [
      'a checkpoint timeout over the limit written in hours',
      `${MINIMAL}checkpoint: { timeoutSeconds: 2h }\n`,
      /^checkpoint\.timeoutSeconds: at most 3600 s/,
    ],
    [
      'a task field at the top level',
      `${MINIMAL}image: python:3.12-slim\n`,
      /^image: a field of a task: put it under tasks\[\]/,
    ],
    [
      'shared memory in MiB',
      MINIMAL.replace('[0, 1, 1]', '[0, 1, 4]').replace('demand:', 'shmSizeGiB: 2048\n    demand:'),
      /^tasks\.0\.shmSizeGiB: .*memory is in GiB: 2048 looks like MiB, which would be 2 GiB/,
    ],
    [
      'an empty program',
      MINIMAL.replace('[python, -c, "print(1)"]', '["", -c, "print(1)"]'),
      /^tasks\.0\.command\.0: the program to run \(the first item\) is empty or blank \(line 6\)$/,
    ],
    [
      'an image that is no image reference',
      MINIMAL.replace('python:3.12-slim', '"../../etc;rm"'),
      /^tasks\.0\.image: not an image reference: \[registry\[:port\]\/\]name\[:tag\]\[@algorithm:digest\]/,
    ],
    [
      'an image name in capitals',
      MINIMAL.replace('python:3.12-slim', 'Python:3.12'),
      /^tasks\.0\.image: not an image reference: .* \(line 5\)$/,
    ],
    [
      'an image with an empty tag',
      MINIMAL.replace('python:3.12-slim', '"python:"'),
      /^tasks\.0\.image: not an image reference/,
    ],
    [
      'an image with a short digest',
      MINIMAL.replace('python:3.12-slim', 'python@sha256:abc'),
      /^tasks\.0\.image: not an image reference/,
    ],
    ['broken YAML', 'name: [unclosed\nteam: t\n', /^not valid YAML\/JSON: /],
    [
      'a duplicated key',
      `${MINIMAL}team: other\n`,
      /^not valid YAML\/JSON: the key "team" is given more than once, again at line \d+, column 1$/,
    ],
    ['a list at the root', '- a\n- b\n', /^\(root\): expected a job spec/],
  ];

  it.each(cases)('rejects %s', (_label, text, expected) => {
    const problems = problemsOf(text);
    expect(
      problems.some((p) => expected.test(p)),
      problems.join('\n'),
    ).toBe(true);
  });

  it('refuses a tagged root (bytes, a set, an ordered map) as no map, with or without a default team', () => {
    // Read as a Buffer, a Set and a Map: their bytes or entries are no fields to name, and a default team spread into
    // one must not make it a map.
    for (const text of ['!!binary aGVsbG8=\n', '!!set { name, team }\n', '!!omap [ name: x, team: t ]\n'])
      for (const defaults of [{}, { team: 'research' }]) {
        let problems: readonly string[] = [];
        try {
          validateSpecText(readSpecText(text, 'spec.yaml'), 'spec.yaml', catalog, defaults);
        } catch (e) {
          problems = (e as ValidationError).problems;
        }
        expect(problems, `${text} ${JSON.stringify(defaults)}`).toEqual([
          expect.stringMatching(/^\(root\): expected a job spec \(a map with name, team and tasks\)/),
        ]);
      }
  });

  it('reports every problem at once, each with its line', () => {
    const problems = problemsOf(
      `name: x\nteam: t\ntasks:\n  - image: a\n    demand: { p3: [1, 4] }\n    replicas: 0\nfoo: 1\n`,
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^tasks\.0\.demand\.p3: .* \(line 5\)$/),
        expect.stringMatching(/^tasks\.0\.replicas: .* \(line 6\)$/),
        expect.stringMatching(/^foo: unknown field .* \(line 7\)$/),
      ]),
    );
  });

  it('rejects oversized requests clearly', () => {
    expect(problemsOf(`${MINIMAL}description: "${'x'.repeat(JOB_SPEC_LIMITS.maxSpecBytes)}"\n`)).toEqual([
      `(root): larger than ${JOB_SPEC_LIMITS.maxSpecBytes} bytes`,
    ]);
    const bigEnv = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`V${i}`, 'x']));
    const body = { name: 'e', team: 't', tasks: [{ image: 'a', demand: [0, 1, 1], env: bigEnv }] };
    expect(() => validateJobSpec(body, 'api', catalog)).toThrow(/tasks\.0\.env: 300 variables, at most 256/);
    const longEnv = {
      name: 'e',
      team: 't',
      tasks: [{ image: 'a', demand: [0, 1, 1], env: { A: 'y'.repeat(70_000) } }],
    };
    expect(() => validateJobSpec(longEnv, 'api', catalog)).toThrow(
      /tasks\.0\.env: 70003 bytes in total, at most 65536/,
    );
    const manyTemplates = {
      name: 'e',
      team: 't',
      tasks: Array.from({ length: 65 }, (_, i) => ({ name: `t${i}`, image: 'a', demand: [0, 1, 1] })),
    };
    expect(() => validateJobSpec(manyTemplates, 'api', catalog)).toThrow(/tasks: at most 64 tasks/);
    expect(() => validateJobSpec({ name: 'n'.repeat(64), team: 't', tasks: [] }, 'api', catalog)).toThrow(
      /name: at most 63 characters/,
    );
  });
});

describe('parseJobSpec: success models and unsuccessful exit codes', () => {
  it('accepts stages with continuation probabilities, or a success probability and size; dedupes exit codes', () => {
    const staged = parseJobSpec(
      `${MINIMAL}success:\n  kind: stages\n  stageSeconds: [600, 3000]\n  continueProbabilities: [0.4]\nunsuccessfulExitCodes: [4, 3, 4]\n`,
      'spec.yaml',
      catalog,
    );
    expect(staged.success).toEqual({
      kind: 'stages',
      stageSeconds: [600, 3000],
      continueProbabilities: [0.4],
    });
    expect(staged.unsuccessfulExitCodes).toEqual([3, 4]);
    const bare = parseJobSpec(
      `${MINIMAL}success: { kind: success, successProbability: 0.75, expectedSizeSeconds: 3600 }\n`,
      'spec.yaml',
      catalog,
    );
    expect(bare.success).toEqual({ kind: 'success', successProbability: 0.75, expectedSizeSeconds: 3600 });
    expect(parseJobSpec(MINIMAL, 'spec.yaml', catalog).success).toBeUndefined();
  });

  it('names the field, the reason and the line of a bad success model or exit code', () => {
    const wrongCount = problemsOf(
      `${MINIMAL}success:\n  kind: stages\n  stageSeconds: [600, 3000, 100]\n  continueProbabilities: [0.4]\n`,
    );
    expect(wrongCount).toEqual([
      'success.continueProbabilities: needs one probability per stage but the last (2), got 1 (line 11)',
    ]);
    const never = problemsOf(
      `${MINIMAL}success: { kind: stages, stageSeconds: [1, 2], continueProbabilities: [0] }\n`,
    );
    expect(never[0]).toMatch(
      /^success\.continueProbabilities: a stage that never continues makes success impossible/,
    );
    const zero = problemsOf(`${MINIMAL}unsuccessfulExitCodes: [0]\n`);
    expect(zero).toEqual(['unsuccessfulExitCodes.0: exit code 0 means success (line 8)']);
    const kind = problemsOf(`${MINIMAL}success: { kind: maybe }\n`);
    expect(kind[0]).toMatch(/^success\.kind: /);
  });
});

describe('valueOfTimePerJobHour', () => {
  it('is read as $ per hour of the job’s completion time, and absent when not given', () => {
    expect(parseJobSpec(`${MINIMAL}valueOfTimePerJobHour: 2.5\n`, 'spec.yaml', catalog)).toMatchObject({
      valueOfTimePerJobHour: 2.5,
    });
    expect(parseJobSpec(MINIMAL, 'spec.yaml', catalog).valueOfTimePerJobHour).toBeUndefined();
  });
});

describe('durations in …Seconds fields', () => {
  it('reads 90s, 30m, 2h, 1d, 1h30m and plain seconds, in the job, its checkpoint and its success model', () => {
    const spec = parseJobSpec(
      `${MINIMAL}expectedDurationSeconds: 1d\nnoMoveSeconds: 1h30m\n` +
        `checkpoint: { timeoutSeconds: 90s, everySeconds: "600", restoreDelaySeconds: 2m, initDelaySeconds: 0.5m }\n` +
        `success: { kind: stages, stageSeconds: [30m, 1h30m, 2h, 20h], continueProbabilities: [0.5, 0.5, 0.5] }\n`,
      'spec.yaml',
      catalog,
    );
    expect(spec).toMatchObject({
      expectedDurationSeconds: 86400,
      noMoveSeconds: 5400,
      checkpoint: { timeoutSeconds: 90, everySeconds: 600, restoreDelaySeconds: 120, initDelaySeconds: 30 },
      success: { kind: 'stages', stageSeconds: [1800, 5400, 7200, 72000] },
    });
  });
});

describe('checkpoint.everySeconds', () => {
  it('takes 0 for a job that never checkpoints on its own, and refuses a negative cadence naming the field', () => {
    expect(
      parseJobSpec(`${MINIMAL}checkpoint: { everySeconds: 0 }\n`, 'spec.yaml', catalog).checkpoint,
    ).toMatchObject({
      everySeconds: 0,
    });
    expect(() => parseJobSpec(`${MINIMAL}checkpoint: { everySeconds: -5 }\n`, 'spec.yaml', catalog)).toThrow(
      /checkpoint\.everySeconds: must be 0 seconds or more/,
    );
  });
});

describe('parseJobSpec: retryStrategy', () => {
  it('reads attempts and exit rules (codes as strings or numbers, Batch’s upper-case actions too)', () => {
    const spec = parseJobSpec(
      `${MINIMAL}retryStrategy:\n  attempts: 3\n  evaluateOnExit:\n    - { onExitCode: "137", action: retry }\n` +
        `    - { onExitCode: 2, action: EXIT }\n    - { onExitCode: "1*", action: exit }\n`,
      'spec.yaml',
      catalog,
    );
    expect(spec.retryStrategy).toEqual({
      attempts: 3,
      evaluateOnExit: [
        { onExitCode: '137', action: 'retry' },
        { onExitCode: '2', action: 'exit' },
        { onExitCode: '1*', action: 'exit' },
      ],
    });
    expect(parseJobSpec(`${MINIMAL}retryStrategy: {}\n`, 'spec.yaml', catalog).retryStrategy).toEqual({
      attempts: 1,
    });
    expect(parseJobSpec(MINIMAL, 'spec.yaml', catalog).retryStrategy).toBeUndefined();
  });

  it('names the field, the reason and the line of bad attempts, globs, actions and unknown keys', () => {
    expect(problemsOf(`${MINIMAL}retryStrategy: { attempts: 11 }\n`)).toEqual([
      'retryStrategy.attempts: at most 10 (line 8)',
    ]);
    expect(problemsOf(`${MINIMAL}retryStrategy: { attempts: 0 }\n`)).toEqual([
      'retryStrategy.attempts: at least 1 (the first run counts) (line 8)',
    ]);
    expect(problemsOf(`${MINIMAL}retryStrategy: { attempts: 2.5 }\n`)).toEqual([
      'retryStrategy.attempts: a whole number (line 8)',
    ]);
    const globs = problemsOf(
      `${MINIMAL}retryStrategy:\n  attempts: 2\n  evaluateOnExit:\n    - { onExitCode: "13?", action: retry }\n` +
        `    - { onExitCode: "", action: retry }\n    - { onExitCode: -1, action: retry }\n` +
        `    - { onExitCode: "1*", action: again }\n`,
    );
    expect(globs).toEqual([
      'retryStrategy.evaluateOnExit.0.onExitCode: only digits and * (any run of digits), e.g. "137" or "1*" (line 11)',
      'retryStrategy.evaluateOnExit.1.onExitCode: only digits and * (any run of digits), e.g. "137" or "1*" (line 12)',
      'retryStrategy.evaluateOnExit.2.onExitCode: expected an exit code or a glob of digits and *, e.g. "137" or "1*" (line 13)',
      'retryStrategy.evaluateOnExit.3.action: expected retry or exit (line 14)',
    ]);
    expect(
      problemsOf(
        `${MINIMAL}retryStrategy:\n  attempt: 3\n  evaluateOnExit: [{ onExitCode: "1", onReason: x }]\n`,
      ),
    ).toEqual([
      'retryStrategy.evaluateOnExit.0.action: required: retry or exit (line 10)',
      'retryStrategy.evaluateOnExit.0.onReason: unknown field (known: onExitCode, action) (line 10)',
      'retryStrategy.attempt: unknown field, did you mean attempts? (known: attempts, evaluateOnExit) (line 9)',
    ]);
    // An exit code is 0–255 written either way ("300" would never match).
    expect(
      problemsOf(`${MINIMAL}retryStrategy:\n  evaluateOnExit: [{ onExitCode: "300", action: exit }]\n`),
    ).toEqual(['retryStrategy.evaluateOnExit.0.onExitCode: exit codes are 0–255 (line 9)']);
    expect(problemsOf(`${MINIMAL}retryStrategy: { evaluateOnExit: [] }\n`)).toEqual([
      'retryStrategy.evaluateOnExit: give at least one rule, or leave evaluateOnExit out (line 8)',
    ]);
  });

  it('refuses an exit code or glob with a leading zero, which would never match, and takes 0 and "0*"', () => {
    const rules = (...codes: string[]): string =>
      `${MINIMAL}retryStrategy:\n  evaluateOnExit:\n` +
      codes.map((c) => `    - { onExitCode: ${c}, action: exit }\n`).join('');
    expect(problemsOf(rules('"0137"', '"00"', '"01*"', '"0*7"'))).toEqual([
      'retryStrategy.evaluateOnExit.0.onExitCode: "0137": exit codes are written without leading zeros, write 137 (line 10)',
      'retryStrategy.evaluateOnExit.1.onExitCode: "00": exit codes are written without leading zeros, write 0 (line 11)',
      'retryStrategy.evaluateOnExit.2.onExitCode: "01*" never matches: exit codes are written without leading zeros (a glob starting with 0 matches only 0) (line 12)',
      'retryStrategy.evaluateOnExit.3.onExitCode: "0*7" never matches: exit codes are written without leading zeros (a glob starting with 0 matches only 0) (line 13)',
    ]);
    // YAML reads an unquoted 0137 as the number 137, which is what it means.
    const spec = parseJobSpec(rules('"0"', '"0*"', '"*07"', '0137'), 's.yaml', catalog);
    const globs = spec.retryStrategy?.evaluateOnExit?.map((r) => r.onExitCode);
    expect(globs).toEqual(['0', '0*', '*07', '137']);
    expect(exitCodeMatches('0*', 0)).toBe(true);
    expect(exitCodeMatches('*07', 107)).toBe(true);
  });
});

describe('retryVerdict: the first matching rule decides, no match retries, attempts run out', () => {
  it('matches globs of digits and * against the whole exit code', () => {
    expect(exitCodeMatches('137', 137)).toBe(true);
    expect(exitCodeMatches('137', 1370)).toBe(false);
    expect(exitCodeMatches('1*', 1)).toBe(true);
    expect(exitCodeMatches('1*', 143)).toBe(true);
    expect(exitCodeMatches('1*', 21)).toBe(false);
    expect(exitCodeMatches('*3', 143)).toBe(true);
    expect(exitCodeMatches('*', 0)).toBe(true);
  });

  it('retries while attempts are left; exit rules fail at once; without rules every failure retries', () => {
    const spec = parseJobSpec(
      `${MINIMAL}retryStrategy:\n  attempts: 3\n  evaluateOnExit:\n    - { onExitCode: "137", action: retry }\n` +
        `    - { onExitCode: "1*", action: exit }\n`,
      'spec.yaml',
      catalog,
    );
    expect(retryVerdict(spec, 1, 137)).toMatchObject({
      retry: true,
      why: 'exit code 137 matches evaluateOnExit[0] (137: retry); retrying (attempt 2 of 3)',
    });
    expect(retryVerdict(spec, 3, 137)).toMatchObject({
      retry: false,
      why: 'exit code 137 matches evaluateOnExit[0] (137: retry); no attempts left',
    });
    expect(retryVerdict(spec, 1, 12)).toMatchObject({
      retry: false,
      why: 'exit code 12 matches evaluateOnExit[1] (1*: exit)',
    });
    expect(retryVerdict(spec, 2, 3)).toMatchObject({
      retry: true,
      why: 'exit code 3 matches no evaluateOnExit rule; retrying (attempt 3 of 3)',
    });
    expect(retryVerdict(spec, 1, undefined).retry).toBe(true);
    const bare = parseJobSpec(`${MINIMAL}retryStrategy: { attempts: 2 }\n`, 'spec.yaml', catalog);
    expect(retryVerdict(bare, 1, 1)).toMatchObject({
      retry: true,
      why: 'exit code 1; retrying (attempt 2 of 2)',
    });
    expect(retryVerdict(parseJobSpec(MINIMAL, 'spec.yaml', catalog), 1, 1).retry).toBe(false);
  });
});

describe('parseJobSpec: NUL bytes', () => {
  // A process argument or environment value is a C string: a NUL would only fail (or be cut) when the task starts.
  it('refuses a NUL byte in a command argument or an environment value, naming the field', () => {
    const spec = (command: string, env: string): string => `
name: tiny
team: ml
tasks:
  - image: python:3.12-slim
    command: [python, "${command}"]
    env: { MODE: "${env}" }
    demand: { any: [0, 1, 1] }
`;
    const inCommand = problemsOf(spec('a\\0b', 'fast'));
    expect(inCommand.some((p) => /tasks\.0\.command\.1.*NUL byte/.test(p))).toBe(true);
    const inEnv = problemsOf(spec('train.py', 'x\\0y'));
    expect(inEnv.some((p) => /tasks\.0\.env\.MODE.*NUL byte/.test(p))).toBe(true);
    // Without the NUL the same spec is accepted.
    expect(() => parseJobSpec(spec('train.py', 'fast'), 'spec.yaml', catalog)).not.toThrow();
  });
});

describe('parseJobSpec: every numeric field is bounded', () => {
  type Spec = Record<string, unknown> & { tasks: Record<string, unknown>[] };
  const base = (): Spec => ({
    name: 'tiny',
    team: 'ml',
    tasks: [{ image: 'python:3.12-slim', command: ['python'], demand: { any: [0, 1, 1] } }],
  });
  const task = (s: Spec): Record<string, unknown> => s.tasks[0] as Record<string, unknown>;
  const L = JOB_SPEC_LIMITS;
  /** Field, how to set it, its largest accepted value (undefined: the catalog check decides), the problem's text. */
  const fields: [string, (s: Spec, v: number) => void, number | undefined, string][] = [
    [
      'expectedDurationSeconds',
      (s, v) => (s['expectedDurationSeconds'] = v),
      L.maxDurationSeconds,
      'at most 31536000 s (365 days)',
    ],
    [
      'noMoveSeconds',
      (s, v) => (s['noMoveSeconds'] = v),
      L.maxDurationSeconds,
      'at most 31536000 s (365 days)',
    ],
    [
      'checkpoint.everySeconds',
      (s, v) => (s['checkpoint'] = { everySeconds: v }),
      L.maxDurationSeconds,
      'at most 31536000 s',
    ],
    [
      'checkpoint.restoreDelaySeconds',
      (s, v) => (s['checkpoint'] = { restoreDelaySeconds: v }),
      L.maxDelaySeconds,
      'at most 86400 s (a day)',
    ],
    [
      'checkpoint.initDelaySeconds',
      (s, v) => (s['checkpoint'] = { initDelaySeconds: v }),
      L.maxDelaySeconds,
      'at most 86400 s (a day)',
    ],
    [
      'checkpoint.timeoutSeconds',
      (s, v) => (s['checkpoint'] = { timeoutSeconds: v }),
      L.maxCheckpointTimeoutSeconds,
      'at most 3600 s',
    ],
    [
      'totalIterations',
      (s, v) => (s['totalIterations'] = Math.round(v)),
      L.maxIterations,
      'at most 1000000000000000',
    ],
    ['tasks.0.replicas', (s, v) => (task(s)['replicas'] = Math.round(v)), L.maxTasks, ''],
    ['tasks.0.shmSizeGiB', (s, v) => (task(s)['shmSizeGiB'] = v), undefined, 'at most 65536 GiB'],
    [
      'tasks.0.demand.any',
      (s, v) => (task(s)['demand'] = { any: [0, v, 1] }),
      undefined,
      'vcpus must be at most 4096',
    ],
    [
      'tasks.0.demand.any',
      (s, v) => (task(s)['demand'] = { any: [0, 1, v] }),
      undefined,
      'memoryGiB must be at most 65536',
    ],
    [
      'tasks.0.demand.any',
      (s, v) => (task(s)['demand'] = { any: [Math.round(v), 1, 1] }),
      undefined,
      'gpus must be at most 64',
    ],
    ['queue.priority', (s, v) => (s['queue'] = { priority: v }), L.maxPriority, 'at most 1000000'],
    ['queue.priority', (s, v) => (s['queue'] = { priority: -v }), L.maxPriority, 'at least -1000000'],
    [
      'success.expectedSizeSeconds',
      (s, v) => (s['success'] = { kind: 'success', successProbability: 0.5, expectedSizeSeconds: v }),
      L.maxDurationSeconds,
      'at most 31536000 s (365 days)',
    ],
    [
      'success.stageSeconds.0',
      (s, v) => (s['success'] = { kind: 'stages', stageSeconds: [v], continueProbabilities: [] }),
      L.maxDurationSeconds,
      'at most 31536000 s (365 days)',
    ],
    [
      'unsuccessfulExitCodes.0',
      (s, v) => (s['unsuccessfulExitCodes'] = [Math.round(v)]),
      255,
      'exit codes are 1–255',
    ],
    [
      'retryStrategy.attempts',
      (s, v) => (s['retryStrategy'] = { attempts: Math.round(v) }),
      L.maxAttempts,
      'at most 10',
    ],
    [
      'retryStrategy.evaluateOnExit.0.onExitCode',
      (s, v) =>
        (s['retryStrategy'] = {
          attempts: 2,
          evaluateOnExit: [{ onExitCode: Math.round(v), action: 'retry' }],
        }),
      255,
      '',
    ],
  ];

  function problems(spec: Spec): readonly string[] {
    try {
      validateJobSpec(spec, 'body', catalog);
      return [];
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      return (e as ValidationError).problems;
    }
  }

  it('refuses any value past its bound (1e300, JSON’s 1e400 read as Infinity), naming the field and the bound', () => {
    for (const [field, set, max, text] of fields) {
      const tooBig = fc.oneof(
        fc.double({ min: (max ?? 100_000) + 1, max: 1e300, noNaN: true }),
        fc.constantFrom(Number.POSITIVE_INFINITY, 1e300),
      );
      fc.assert(
        fc.property(tooBig, (v) => {
          const spec = base();
          set(spec, v);
          const found = problems(spec);
          // zod refuses a non-finite number as not a number at all: the field is named either way.
          const bound = Number.isFinite(v) ? text : '';
          expect(
            found.some((p) => p.startsWith(`${field}`) && p.includes(bound)),
            `${field}=${v}: ${found.join('; ')}`,
          ).toBe(true);
        }),
        { numRuns: 25 },
      );
      if (max === undefined) continue;
      const atBound = base();
      set(atBound, max);
      expect(problems(atBound), `${field}=${max}`).toEqual([]);
    }
  });

  it('bounds durations written as text too, and the lists of stages', () => {
    expect(problemsOf(`${MINIMAL}expectedDurationSeconds: 366d\n`)).toEqual([
      'expectedDurationSeconds: at most 31536000 s (365 days) (line 8)',
    ]);
    expect(() =>
      parseJobSpec(`${MINIMAL}expectedDurationSeconds: 365d\n`, 'spec.yaml', catalog),
    ).not.toThrow();
    const stages = base();
    stages['queue'] = { stages: Array.from({ length: 65 }, (_, i) => i) };
    expect(problems(stages)).toEqual(['queue.stages: at most 64 stages']);
    const success = base();
    success['success'] = {
      kind: 'stages',
      stageSeconds: Array.from({ length: 65 }, () => 60),
      continueProbabilities: Array.from({ length: 64 }, () => 0.5),
    };
    expect(problems(success)).toContain('success.stageSeconds: at most 64 stages');
  });
});

describe('every field of the job spec schema', () => {
  // The parser builds the JobSpec field by field: a field added to the schema but not there would be dropped without
  // a word. A spec with every field set must come back with every one (under its JobSpec name).
  it('comes back from validation, at the job and at the task level', () => {
    const everything = {
      name: 'everything',
      team: 'research',
      description: 'a spec with every field',
      tasks: [
        {
          name: 'main',
          image: 'python:3.12-slim',
          command: ['python', 'train.py'],
          env: { SEED: '1' },
          demand: { c7i: [0, 2, 4] },
          replicas: 2,
          shmSizeGiB: 1,
          workload: 'trainer',
        },
        { name: 'built', build: 'contexts/sha256-0000', command: ['true'], demand: [0, 1, 1] },
      ],
      checkpoint: { signal: 'SIGUSR1', timeoutSeconds: 30 },
      totalIterations: 1000,
      expectedDurationSeconds: '2h',
      noMoveSeconds: '10m',
      dependsOn: ['job-1'],
      maxRunSeconds: '4h',
      valueOfTimePerJobHour: 2,
      workload: 'pipeline',
      queue: { class: 'small', priority: 1 },
      success: { kind: 'success', successProbability: 0.5, expectedSizeSeconds: 3600 },
      unsuccessfulExitCodes: [3],
      retryStrategy: { attempts: 2 },
      network: { sensitivity: 'memcached', pattern: 'star', gibPerHour: 1 },
      spot: 'preferred',
      spotMaxDelayMinutes: 30,
      arrayProperties: { size: 8, index: 3 },
    };
    const renamed: Record<string, string> = { spotMaxDelayMinutes: 'spotMaxDelaySeconds' };
    const spec = validateJobSpec(everything, 'spec', catalog) as unknown as Record<string, unknown>;
    const jobKeys = Object.keys(jobSpecSchema.shape);
    expect(Object.keys(everything).sort(), 'set every field of the schema in this spec').toEqual(
      [...jobKeys].sort(),
    );
    for (const key of jobKeys) expect(spec[renamed[key] ?? key], key).toBeDefined();
    // Stored, every field validates again to itself (a restore from the job archive validates what was stored).
    expect(validateJobSpec(writtenJobSpec(JSON.parse(JSON.stringify(spec))), 'archived', catalog)).toEqual(
      spec,
    );
    const taskKeys = Object.keys(taskSchema.shape);
    const tasks = spec['tasks'] as Record<string, unknown>[];
    for (const key of taskKeys)
      expect(
        tasks.some((t) => t[key] !== undefined),
        `tasks[].${key}`,
      ).toBe(true);
    expect(
      [...new Set(everything.tasks.flatMap((t) => Object.keys(t)))].sort(),
      'set every field of a task in this spec',
    ).toEqual([...taskKeys].sort());
  });
});

describe('arrayProperties (array jobs)', () => {
  const withArray = (array: string): string => `${MINIMAL}arrayProperties: ${array}\n`;

  it('takes a size (an array to submit) or a size and an index (one job of it)', () => {
    expect(parseJobSpec(withArray('{ size: 10 }'), 'spec.yaml', catalog).arrayProperties).toEqual({
      size: 10,
    });
    expect(parseJobSpec(withArray('{ size: 10, index: 9 }'), 'spec.yaml', catalog).arrayProperties).toEqual({
      size: 10,
      index: 9,
    });
    expect(parseJobSpec(MINIMAL, 'spec.yaml', catalog).arrayProperties).toBeUndefined();
    expect(arraySubmissionSize({ arrayProperties: { size: 10 } })).toBe(10);
    expect(arraySubmissionSize({ arrayProperties: { size: 10, index: 3 } })).toBeUndefined();
    expect(arraySubmissionSize({})).toBeUndefined();
  });

  it('names the field and the reason for a size or index out of range, and an unknown key', () => {
    expect(problemsOf(withArray('{ size: 1 }'))).toEqual([
      'arrayProperties.size: an array holds at least 2 jobs (submit one job without arrayProperties) (line 8)',
    ]);
    expect(problemsOf(withArray(`{ size: ${JOB_SPEC_LIMITS.maxArraySize + 1} }`))).toEqual([
      `arrayProperties.size: at most ${JOB_SPEC_LIMITS.maxArraySize} jobs (line 8)`,
    ]);
    expect(problemsOf(withArray('{ size: 2.5 }'))).toEqual(['arrayProperties.size: a whole number (line 8)']);
    expect(problemsOf(withArray('{ size: 4, index: 4 }'))).toEqual([
      'arrayProperties.index: must be below size (4) (line 8)',
    ]);
    expect(problemsOf(withArray('{ size: 4, index: -1 }'))).toEqual([
      'arrayProperties.index: from 0 (line 8)',
    ]);
    expect(problemsOf(withArray('{ count: 4 }'))).toEqual([
      'arrayProperties.size: required: how many jobs the array holds (line 8)',
      'arrayProperties.count: unknown field (known: size, index) (line 8)',
    ]);
    expect(problemsOf(withArray('ten'))).toEqual([
      'arrayProperties: expected { size: N }, N the number of jobs (line 8)',
    ]);
  });

  it('waits for up to as many jobs as an array holds', () => {
    const ids = Array.from({ length: JOB_SPEC_LIMITS.maxArraySize }, (_, i) => `job-${i + 1}`);
    const spec = validateJobSpec(
      { name: 'gather', team: 'ml', dependsOn: ids, tasks: [{ image: 'x', demand: { any: [0, 1, 1] } }] },
      'api',
      catalog,
    );
    expect(spec.dependsOn).toHaveLength(JOB_SPEC_LIMITS.maxArraySize);
    expect(() =>
      validateJobSpec(
        {
          name: 'gather',
          team: 'ml',
          dependsOn: [...ids, `job-${JOB_SPEC_LIMITS.maxArraySize + 1}`],
          tasks: [{ image: 'x', demand: { any: [0, 1, 1] } }],
        },
        'api',
        catalog,
      ),
    ).toThrow(/dependsOn: at most 10000 jobs/);
  });
});

describe("an array's dependencies (AWS Batch's N_TO_N and SEQUENTIAL)", () => {
  const spec = (dependsOn: unknown[], arrayProperties?: unknown): unknown => ({
    name: 'call',
    team: 'genomics',
    tasks: [{ image: 'x', demand: { any: [0, 1, 1] } }],
    dependsOn,
    ...(arrayProperties === undefined ? {} : { arrayProperties }),
  });
  const refused = (value: unknown): readonly string[] => {
    try {
      validateJobSpec(value, 'api', catalog);
    } catch (e) {
      return (e as ValidationError).problems;
    }
    throw new Error('expected the spec to be refused');
  };

  it('keeps N_TO_N and SEQUENTIAL with the array, and plain ids in dependsOn', () => {
    const parsed = validateJobSpec(
      spec(['job-2', { jobId: 'job-7', type: 'N_TO_N' }, { type: 'SEQUENTIAL' }], { size: 3 }),
      'api',
      catalog,
    );
    expect(parsed.dependsOn).toEqual(['job-2']);
    expect(parsed.arrayProperties).toEqual({ size: 3, sameIndexOf: ['job-7'], sequential: true });
    // Written back as Batch writes them.
    expect(writtenJobSpec(JSON.parse(JSON.stringify(parsed)))).toMatchObject({
      dependsOn: ['job-2', { jobId: 'job-7', type: 'N_TO_N' }, { type: 'SEQUENTIAL' }],
      arrayProperties: { size: 3 },
    });
    expect(validateJobSpec(writtenJobSpec(JSON.parse(JSON.stringify(parsed))), 'again', catalog)).toEqual(
      parsed,
    );
  });

  it('bounds the ids an array stores in all: its size times what each job waits for', () => {
    const ids = (n: number): string[] => Array.from({ length: n }, (_, i) => `job-${i + 1}`);
    // An array of 1,000 may wait for all of another; 10,000 jobs may each wait for 100.
    expect(validateJobSpec(spec(ids(1000), { size: 1000 }), 'api', catalog).dependsOn).toHaveLength(1000);
    expect(validateJobSpec(spec(ids(100), { size: 10_000 }), 'api', catalog).dependsOn).toHaveLength(100);
    expect(refused(spec(ids(101), { size: 10_000 }))).toEqual([
      'dependsOn: 10000 jobs each waiting for 101 make 1010000 waits, at most 1000000 in one array: let one job wait ' +
        'for those, and the array for that job',
    ]);
    // One job (or one of an array, with its index) waits for up to the dependency limit.
    expect(
      validateJobSpec(spec(ids(10_000), { size: 10_000, index: 3 }), 'api', catalog).dependsOn,
    ).toHaveLength(10_000);
  });

  it('names the entry and the reason of a bad one', () => {
    expect(refused(spec([{ jobId: 'job-7', type: 'N_TO_N' }]))).toEqual([
      'dependsOn.0: N_TO_N is for the jobs of an array: give arrayProperties.size (and no index)',
    ]);
    expect(refused(spec([{ type: 'SEQUENTIAL' }], { size: 3, index: 1 }))).toEqual([
      'dependsOn.0: SEQUENTIAL is for the jobs of an array: give arrayProperties.size (and no index)',
    ]);
    expect(refused(spec([{ type: 'N_TO_N' }], { size: 3 }))).toEqual([
      'dependsOn.0.jobId: required: a job of the array to pair with',
    ]);
    expect(refused(spec([{ jobId: 'job-7', type: 'SEQUENTIAL' }], { size: 3 }))).toEqual([
      'dependsOn.0.jobId: SEQUENTIAL names no job: each job of the array waits for the one before it',
    ]);
    expect(refused(spec([{ jobId: 'job-7', type: 'ONE_TO_ONE' }], { size: 3 }))).toEqual([
      'dependsOn.0: expected an array dependency: { jobId: job-<n>, type: N_TO_N } or { type: SEQUENTIAL }',
    ]);
    expect(refused(spec([7], { size: 3 }))).toEqual([
      'dependsOn.0: expected a job id (job-<n>) or an array dependency: { jobId: job-<n>, type: N_TO_N } or { type: SEQUENTIAL }',
    ]);
    expect(refused(spec(['job-7', { jobId: 'job-7', type: 'N_TO_N' }], { size: 3 }))).toEqual([
      'dependsOn: names a job twice',
    ]);
    expect(refused(spec([{ type: 'SEQUENTIAL' }, { type: 'SEQUENTIAL' }], { size: 3 }))).toEqual([
      'dependsOn: SEQUENTIAL twice',
    ]);
  });
});

describe('task names after expanding replicas', () => {
  const spec = (tasks: string): string => `name: n\nteam: t\ntasks:\n${tasks}`;

  it('refuses a template named like a replica of another, naming both', () => {
    expect(
      problemsOf(
        spec(
          '  - { name: w, image: x, replicas: 2, demand: [0, 1, 1] }\n  - { name: w-1, image: x, demand: [0, 1, 1] }\n',
        ),
      ),
    ).toEqual([
      'tasks.1.name: two tasks named w-1 after expanding replicas: replica 1 of tasks.0 (w, replicas: 2) and ' +
        'tasks.1 (the replicas of a template are named <name>-<index>) (line 5)',
    ]);
    // The other way round, and between two templates with replicas (`a-1` × 2 is a-1-0, a-1-1; `a` × 12 has a-1…).
    expect(
      problemsOf(
        spec(
          '  - { name: w-1, image: x, demand: [0, 1, 1] }\n  - { name: w, image: x, replicas: 2, demand: [0, 1, 1] }\n',
        ),
      ),
    ).toEqual([
      expect.stringMatching(
        /^tasks\.1\.name: two tasks named w-1 after expanding replicas: tasks\.0 and replica 1 of tasks\.1 \(w, replicas: 2\)/,
      ),
    ]);
    expect(
      problemsOf(
        spec(
          '  - { name: a-1, image: x, replicas: 2, demand: [0, 1, 1] }\n' +
            '  - { name: a, image: x, replicas: 2, demand: [0, 1, 1] }\n' +
            '  - { name: a-1-0, image: x, demand: [0, 1, 1] }\n',
        ),
      ),
    ).toEqual([
      expect.stringMatching(
        /^tasks\.2\.name: two tasks named a-1-0 after expanding replicas: replica 0 of tasks\.0/,
      ),
    ]);
  });

  it('accepts exactly the specs whose expanded task names are all distinct (property)', () => {
    const template = fc.record({
      name: fc.option(fc.constantFrom('w', 'w-0', 'w-1', 'w-1-0', 'task-0', 'task-1', 'task-1-1'), {
        nil: undefined,
      }),
      replicas: fc.integer({ min: 1, max: 3 }),
    });
    fc.assert(
      fc.property(fc.array(template, { minLength: 1, maxLength: 5 }), (templates) => {
        const body = {
          name: 'p',
          team: 't',
          tasks: templates.map((t) => ({ ...t, image: 'x', demand: [0, 1, 1] })),
        };
        const names = templates.flatMap((t, i) => {
          const name = t.name ?? `task-${i}`;
          return t.replicas === 1 ? [name] : Array.from({ length: t.replicas }, (_, r) => `${name}-${r}`);
        });
        const templateNames = templates.map((t, i) => t.name ?? `task-${i}`);
        const distinct =
          new Set(names).size === names.length && new Set(templateNames).size === templateNames.length;
        let accepted = true;
        try {
          const parsed = validateJobSpec(body, 'api', catalog);
          expect(new Set(expandTasks(parsed).map((t) => t.name)).size).toBe(names.length);
        } catch (e) {
          accepted = false;
          expect((e as ValidationError).problems.every((p) => /^tasks\.\d+\.name: /.test(p))).toBe(true);
        }
        expect(accepted).toBe(distinct);
      }),
      { numRuns: 300, seed: 11 },
    );
  });
});

describe('unknown fields in a large request', () => {
  /** The problems of a request that must be refused. */
  const refusal = (body: unknown): readonly string[] => {
    try {
      validateJobSpec(body, 'api', catalog);
    } catch (e) {
      if (e instanceof ValidationError) return e.problems;
      throw e;
    }
    throw new Error('the request was accepted');
  };

  /**
   * The fastest of a few runs of each, in ms, taken in turns: a busy machine slows both alike, and the fastest run is
   * the one it slowed least. Only their ratio is asserted.
   */
  const fastestMs = (a: () => unknown, b: () => unknown): [number, number] => {
    const fastest: [number, number] = [Infinity, Infinity];
    for (let i = 0; i < 5; i++)
      [a, b].forEach((run, k) => {
        const started = performance.now();
        run();
        fastest[k] = Math.min(fastest[k] ?? Infinity, performance.now() - started);
      });
    return fastest;
  };

  it('suggests no field for a key far longer than any, and answers a megabyte key at once', () => {
    const near = {
      name: 'a',
      team: 't',
      tasks: [{ image: 'x', demand: [0, 1, 1] }],
      [`name${'x'.repeat(80)}`]: 1,
    };
    let problems: readonly string[] = [];
    try {
      validateJobSpec(near, 'api', catalog);
    } catch (e) {
      problems = (e as ValidationError).problems;
    }
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^\["namex+…"\]: unknown field \(known: name, team/);
    expect(problems[0]).not.toContain('did you mean');
    // Refusing a megabyte key costs about what parsing the request a few times does (timed alike, so a busy machine
    // slows both alike): no edit distance runs over the key, which would cost its length times the known names'.
    const huge = { ...near, ['k'.repeat(JOB_SPEC_LIMITS.maxSpecBytes - 200)]: 1 };
    const text = JSON.stringify(huge);
    expect(refusal(huge)[1]).toMatch(/^\["k{64}…"\]: unknown field \(known: /);
    const [refusalMs, tenParsesMs] = fastestMs(
      () => refusal(huge),
      () => {
        for (let i = 0; i < 10; i++) JSON.parse(text);
      },
    );
    expect(refusalMs).toBeLessThan(5 * tenParsesMs);
  });

  it('explains the first unknown fields of an object and counts the rest', () => {
    const body: Record<string, unknown> = {
      name: 'a',
      team: 't',
      tasks: [{ image: 'x', demand: [0, 1, 1] }],
    };
    const withUnknown = (count: number): Record<string, unknown> => {
      const more: Record<string, unknown> = { ...body };
      for (let i = 0; i < count; i++) more[`unknown${i}`] = 1;
      return more;
    };
    const many = withUnknown(50_000);
    const problems = refusal(many);
    // Fifty times the fields cost about what fifty requests of a fiftieth of them do (timed alike, so a busy machine
    // slows both alike); a pass over all of them for each field would cost fifty times that.
    const fewer = withUnknown(1_000);
    const [manyMs, fiftyFewerMs] = fastestMs(
      () => refusal(many),
      () => {
        for (let i = 0; i < 50; i++) refusal(fewer);
      },
    );
    expect(manyMs).toBeLessThan(5 * fiftyFewerMs);
    expect(problems).toHaveLength(21);
    expect(problems[0]).toMatch(/^unknown0: unknown field/);
    expect(problems[20]).toBe('(root): 49980 more unknown fields');
    // A few unknown fields are all explained, with their lines.
    expect(problemsOf(`${MINIMAL}nmae: x\ntem: y\n`)).toEqual([
      expect.stringMatching(/^nmae: unknown field, did you mean name\? .*\(line 8\)$/),
      expect.stringMatching(/^tem: unknown field, did you mean team\? .*\(line 9\)$/),
    ]);
  });
});

describe('build.dockerfile', () => {
  const spec = (dockerfile: string): string =>
    `name: b\nteam: t\ntasks:\n  - build: { context: ./ctx, dockerfile: ${JSON.stringify(dockerfile)} }\n    demand: [0, 1, 1]\n`;

  it('takes a path inside the context', () => {
    for (const path of ['Dockerfile.gpu', 'docker/Dockerfile', './ci/Dockerfile.prod', 'a..b/Dockerfile'])
      expect(parseJobSpec(spec(path), 'b.yaml', catalog).tasks[0]?.build?.dockerfile).toBe(path);
  });

  it('refuses one outside the context, naming the field', () => {
    const cases: readonly (readonly [string, RegExp])[] = [
      ['../Dockerfile', /has a `\.\.` path segment/],
      ['docker/../../Dockerfile', /has a `\.\.` path segment/],
      ['/etc/Dockerfile', /has an absolute path/],
      ['.', /names the context directory itself/],
    ];
    for (const [path, reason] of cases) {
      const problems = problemsOf(spec(path));
      expect(problems, path).toHaveLength(1);
      expect(problems[0], path).toMatch(/^tasks\.0\.build\.dockerfile: /);
      expect(problems[0], path).toMatch(reason);
      expect(problems[0], path).toContain('a path inside the build context, relative to it');
    }
  });
});

describe('build', () => {
  const spec = (build: string): string =>
    `name: b\nteam: t\ntasks:\n  - name: main\n    build: ${build}\n    command: [echo]\n    demand: [0, 1, 1]\n`;

  it('names the field at fault in the form its value is written in, with its line', () => {
    expect(problemsOf(spec('{ dockerfile: x }'))).toEqual([
      'tasks.0.build.context: required (string) (line 5)',
    ]);
    expect(problemsOf(spec('{ context: ../ctx1, dockerfile: 7 }'))).toEqual([
      expect.stringMatching(/^tasks\.0\.build\.dockerfile: .*expected string, received number \(line 5\)$/),
    ]);
    expect(problemsOf(spec('{ context: ./ctx, dockerfil: x }'))).toEqual([
      expect.stringMatching(
        /^tasks\.0\.build\.dockerfil: unknown field, did you mean dockerfile\? .*\(line 5\)$/,
      ),
    ]);
    expect(problemsOf(spec('{ context: "" }'))).toEqual([
      'tasks.0.build.context: a build context directory (line 5)',
    ]);
    expect(problemsOf(spec('""'))).toEqual(['tasks.0.build: a build context directory (line 5)']);
    for (const value of ['5', '[./ctx]', 'null'])
      expect(problemsOf(spec(value)), value).toEqual([
        'tasks.0.build: expected a build context directory, or {context, dockerfile} ' +
          '(e.g. {context: ., dockerfile: Dockerfile.gpu}) (line 5)',
      ]);
  });
});

describe('env names JavaScript objects treat specially', () => {
  const withEnv = (env: Record<string, string>): unknown => ({
    name: 'a',
    team: 't',
    tasks: [{ image: 'x', demand: [0, 1, 1], env }],
  });

  it('refuses __proto__ naming the field, from JSON and YAML, rather than dropping it', () => {
    const refusal = (run: () => unknown): readonly string[] => {
      try {
        run();
      } catch (e) {
        expect(e).toBeInstanceOf(ValidationError);
        return (e as ValidationError).problems;
      }
      throw new Error('expected the spec to be refused');
    };
    // JSON.parse makes __proto__ an own key, as an API body's would be.
    const body = JSON.parse('{"__proto__": "x", "A": "1"}') as Record<string, string>;
    expect(refusal(() => validateJobSpec(withEnv(body), 'api', catalog))).toEqual([
      'tasks.0.env.__proto__: __proto__ cannot be an environment name (it would be dropped, not passed to the task)',
    ]);
    expect(problemsOf(`${MINIMAL}    env: { __proto__: x, A: "1" }\n`)).toEqual([
      'tasks.0.env.__proto__: __proto__ cannot be an environment name (it would be dropped, not passed to the task) (line 8)',
    ]);
  });

  it('keeps constructor and prototype as ordinary variables', () => {
    const spec = validateJobSpec(withEnv({ constructor: 'y', prototype: 'z', A: '1' }), 'api', catalog);
    expect(spec.tasks[0]?.env).toEqual({ constructor: 'y', prototype: 'z', A: '1' });
    expect(Object.keys(spec.tasks[0]?.env ?? {})).toEqual(['constructor', 'prototype', 'A']);
  });
});

describe('an image or a program no worker could start', () => {
  it.each([
    'busybox',
    'busybox:latest',
    'python:3.12-slim',
    'pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime',
    'ghcr.io/fleetwise-examples/resnet18-cifar10:0.1',
    '127.0.0.1:9/fleetwise/no-such-image:1',
    'localhost:5000/team/a__b.c--d:v_1.0-rc',
    'Registry.Example.com/x/y@sha256:' + 'a1'.repeat(32),
    'x:1@sha256:' + 'f0'.repeat(32),
    'busybox@sha512:' + 'ab'.repeat(64),
    '[::1]:5000/x',
  ])('accepts %s, as Docker reads it', (image) => {
    const spec = parseJobSpec(MINIMAL.replace('python:3.12-slim', `"${image}"`), 's.yaml', catalog);
    expect(spec.tasks[0]?.image).toBe(image);
  });

  it.each(['a//b', 'a/', '-a', '/a', 'a___b', 'a:-x', `a:${'t'.repeat(129)}`, 'a@sha256:' + 'A'.repeat(64)])(
    'refuses %j, which Docker cannot read',
    (image) => {
      expect(problemsOf(MINIMAL.replace('python:3.12-slim', JSON.stringify(image)))).toEqual([
        expect.stringMatching(/^tasks\.0\.image: not an image reference: .* \(line 5\)$/),
      ]);
    },
  );

  it('refuses an empty program from a JSON body too, and accepts an empty argument after it', () => {
    const body = (command: string[]): unknown => ({
      name: 'a',
      team: 't',
      tasks: [{ image: 'x', demand: [0, 1, 1], command }],
    });
    expect(() => validateJobSpec(body(['']), 'api', catalog)).toThrow(
      'tasks.0.command.0: the program to run (the first item) is empty or blank',
    );
    expect(() => validateJobSpec(body(['  ']), 'api', catalog)).toThrow(
      'tasks.0.command.0: the program to run (the first item) is empty or blank',
    );
    expect(validateJobSpec(body(['echo', '']), 'api', catalog).tasks[0]?.command).toEqual(['echo', '']);
  });

  it('is not refused in a spec accepted before (an archived job), so its archive still restores', () => {
    const archived = {
      name: 'a',
      team: 't',
      tasks: [{ image: 'Old/Image', demand: [0, 1, 1], command: [''] }],
    };
    expect(() => validateJobSpec(archived, 'api', catalog)).toThrow(
      /tasks\.0\.image: not an image reference/,
    );
    const restored = validateJobSpec(archived, 'archive', catalog, { accepted: true });
    expect(restored.tasks[0]).toMatchObject({ image: 'Old/Image', command: [''] });
  });
});

describe('env values written as numbers', () => {
  it('reach the task as the text written in YAML, and as JavaScript prints them from JSON', () => {
    const env = '{ VERSION: 1.10, RUN_ID: 007, MASK: 0x1F, LR: 1e-4, EPOCHS: 10, DEBUG: true, NAME: "1.10" }';
    const yaml = parseJobSpec(`${MINIMAL}    env: ${env}\n`, 's.yaml', catalog);
    expect(yaml.tasks[0]?.env).toEqual({
      VERSION: '1.10',
      RUN_ID: '007',
      MASK: '0x1F',
      LR: '1e-4',
      EPOCHS: '10',
      DEBUG: 'true',
      NAME: '1.10',
    });
    const json = validateJobSpec(
      { name: 'a', team: 't', tasks: [{ image: 'x', demand: [0, 1, 1], env: { EPOCHS: 10, LR: 0.5 } }] },
      'api',
      catalog,
    );
    expect(json.tasks[0]?.env).toEqual({ EPOCHS: '10', LR: '0.5' });
  });
});
