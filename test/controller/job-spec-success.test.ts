import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { parseJobSpec, validateJobSpec } from '../../src/controller/job-spec/parse.js';
import { expectedDurationOf, type JobSpec } from '../../src/controller/job-spec/spec.js';
import { writtenJobSpec } from '../../src/controller/job-spec/written-form.js';
import { admissionInfo } from '../../src/controller/admission-info.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { buildSnapshot, readSnapshotInputs } from '../../src/controller/snapshot.js';
import { ValidationError } from '../../src/core/validation.js';
import { successRank, toDistribution } from '../../src/queue/success.js';
import { CPU_SMALL, rig } from './controller-fixtures.js';

/**
 * A job's success model and its expectedDurationSeconds are one run at full throughput: success-rank orders by the
 * model, admission and the ETA simulation by the duration, so a spec where they disagree is refused, and a spec that
 * gives only the model takes its duration from it.
 */

const catalog = loadCatalogFile();

const MINIMAL = `name: trial
team: ml
tasks:
  - image: python:3.12-slim
    command: [python, train.py]
    demand: { any: [0, 1, 1] }
`;

function problemsOf(text: string): readonly string[] {
  try {
    parseJobSpec(text, 'spec.yaml', catalog);
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return (e as ValidationError).problems;
  }
  throw new Error('expected the spec to be rejected');
}

const parse = (text: string): JobSpec => parseJobSpec(text, 'spec.yaml', catalog);

/** What the job archive holds (JSON) and what `job --json` prints, validated again. */
function resubmitted(spec: JobSpec): JobSpec {
  return validateJobSpec(writtenJobSpec(JSON.parse(JSON.stringify(spec))), 'written', catalog);
}

describe('a success model against expectedDurationSeconds', () => {
  it('refuses stages that do not sum to the declared duration, naming both fields, their values and the line', () => {
    // 30 s of stages ranks the job as a 31 s one while the ETA simulation runs it for 600 s.
    const spec =
      `${MINIMAL}expectedDurationSeconds: 600\n` +
      'success: { kind: stages, stageSeconds: [10, 20], continueProbabilities: [0.9] }\n';
    expect(problemsOf(spec)).toEqual([
      'success.stageSeconds: the stages sum to 30 s but expectedDurationSeconds is 600 s: they must agree ' +
        'within 1% (both are the run through every stage, at full throughput) (line 8)',
    ]);
  });

  it('accepts stages within 1% of the duration, and refuses them just past it', () => {
    const staged = (duration: string): string =>
      `${MINIMAL}expectedDurationSeconds: ${duration}\n` +
      'success: { kind: stages, stageSeconds: [1000, 2000], continueProbabilities: [0.5] }\n';
    expect(parse(staged('3030')).expectedDurationSeconds).toBe(3030);
    expect(parse(staged('2971')).expectedDurationSeconds).toBe(2971);
    expect(parse(staged('50m')).expectedDurationSeconds).toBe(3000);
    expect(problemsOf(staged('3031'))).toEqual([
      expect.stringMatching(
        /^success\.stageSeconds: the stages sum to 3000 s but expectedDurationSeconds is 3031 s/,
      ),
    ]);
    expect(problemsOf(staged('2969'))).toHaveLength(1);
  });

  it('refuses an expected size over the declared duration, naming both fields and their values', () => {
    const sized = (size: number, duration: number): string =>
      `${MINIMAL}expectedDurationSeconds: ${duration}\n` +
      `success: { kind: success, successProbability: 0.5, expectedSizeSeconds: ${size} }\n`;
    expect(problemsOf(sized(3600, 600))).toEqual([
      'success.expectedSizeSeconds: 3600 s is more than expectedDurationSeconds (600 s): an expected size (runs ' +
        'that stop early count their shorter run) must not exceed the full run, within 1% (line 8)',
    ]);
    expect(problemsOf(sized(607, 600))).toHaveLength(1);
    // Smaller is what a model with early stops gives; equal, or within 1%, is a job that always runs to the end.
    expect(parse(sized(300, 600)).expectedDurationSeconds).toBe(600);
    expect(parse(sized(606, 600)).success).toEqual({
      kind: 'success',
      successProbability: 0.5,
      expectedSizeSeconds: 606,
    });
  });
});

describe('a success model without expectedDurationSeconds', () => {
  it('gives the job its stages’ sum, or its expected size, as its expected duration', () => {
    const staged = parse(
      `${MINIMAL}success: { kind: stages, stageSeconds: [10m, 50m], continueProbabilities: [0.4] }\n`,
    );
    expect(expectedDurationOf(staged)).toBe(3600);
    // Read from the model, not stored: the spec stays as written (its request hash, its written form).
    expect(staged.expectedDurationSeconds).toBeUndefined();
    // The rank and the duration are on one time scale: the model's whole run is the duration.
    const dist = toDistribution(staged.success as NonNullable<JobSpec['success']>);
    expect(dist.checkpointsSeconds.at(-1)).toBe(expectedDurationOf(staged));
    expect(successRank(dist)).toBeCloseTo((0.6 * 600 + 0.4 * 3600) / 0.4, 6);
    const sized = parse(
      `${MINIMAL}success: { kind: success, successProbability: 0.75, expectedSizeSeconds: 2h }\n`,
    );
    expect(expectedDurationOf(sized)).toBe(7200);
    expect(expectedDurationOf(parse(MINIMAL))).toBeUndefined();
  });

  it('refuses stages that sum past the longest duration a job may declare, naming the field and the bound', () => {
    expect(
      problemsOf(
        `${MINIMAL}success: { kind: stages, stageSeconds: [200d, 200d], continueProbabilities: [0.5] }\n`,
      ),
    ).toEqual([
      "success.stageSeconds: the stages sum to 34560000 s, the job's expected duration (no " +
        'expectedDurationSeconds): at most 31536000 s (365 days) (line 7)',
    ]);
  });

  it('prints back (job --json, the job archive) to a spec that resubmits to the same job', () => {
    const staged = parse(
      `${MINIMAL}success: { kind: stages, stageSeconds: [0.1, 0.2], continueProbabilities: [0.4] }\n`,
    );
    expect(expectedDurationOf(staged)).toBe(0.1 + 0.2);
    expect(expectedDurationOf(writtenJobSpec(JSON.parse(JSON.stringify(staged))) as JobSpec)).toBe(0.1 + 0.2);
    expect(resubmitted(staged)).toEqual(staged);
    const stageSeconds = fc.array(fc.double({ min: 0.001, max: 86_400, noNaN: true }), {
      minLength: 1,
      maxLength: 8,
    });
    fc.assert(
      fc.property(
        fc.oneof(
          stageSeconds.map((d) => ({
            kind: 'stages',
            stageSeconds: d,
            continueProbabilities: d.slice(1).map(() => 0.5),
          })),
          fc.record({
            kind: fc.constant('success'),
            successProbability: fc.double({ min: 0.01, max: 1, noNaN: true }),
            expectedSizeSeconds: fc.double({ min: 0.001, max: 86_400, noNaN: true }),
          }),
        ),
        (success) => {
          const spec = validateJobSpec(
            {
              name: 'trial',
              team: 'ml',
              tasks: [{ image: 'busybox', demand: { any: [0, 1, 1] } }],
              success,
            },
            'spec',
            catalog,
          );
          expect(expectedDurationOf(spec)).toBeGreaterThan(0);
          expect(resubmitted(spec)).toEqual(spec);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('gets an ETA from a dry run, as a job that declares its duration does', async () => {
    const { controller, clock } = rig();
    try {
      const spec = validateJobSpec(
        {
          name: 'staged',
          team: 'research',
          tasks: [{ name: 'main', image: 'busybox:latest', demand: CPU_SMALL }],
          success: { kind: 'stages', stageSeconds: [600, 3000], continueProbabilities: [0.5] },
        },
        'spec',
        catalog,
      );
      const eta = await controller.estimate(spec);
      expect(eta?.basis).toMatch(/^simulated \d+ round\(s\) ahead/);
      expect(eta?.completionSeconds as number).toBeGreaterThanOrEqual(clock.nowSeconds() + 3600);
    } finally {
      await controller.stop();
    }
  });
});

describe('examples/jobs/trial-stages.yaml', () => {
  it('declares stages that sum to its expected duration, and an exit code that ends it unsuccessful', () => {
    const file = join(PROJECT_ROOT, 'examples', 'jobs', 'trial-stages.yaml');
    const spec = parseJobSpec(readFileSync(file, 'utf8'), 'trial-stages.yaml', catalog);
    expect(spec.success).toEqual({
      kind: 'stages',
      stageSeconds: [600, 1200, 2400],
      continueProbabilities: [0.5, 0.8],
    });
    expect(spec.expectedDurationSeconds).toBe(4200);
    expect(spec.unsuccessfulExitCodes).toEqual([3]);
    const dist = toDistribution(spec.success as NonNullable<JobSpec['success']>);
    expect(dist.successProbability).toBeCloseTo(0.4, 9);
    expect(resubmitted(spec)).toEqual(spec);
  });
});

describe("admission's view of a job with a success model", () => {
  it('counts the stages passed from its progress, on the time scale of its expected duration', () => {
    const store = new MemoryStateStore({ nowSeconds: () => 100 });
    const spec = parseJobSpec(
      readFileSync(join(PROJECT_ROOT, 'examples', 'jobs', 'trial-stages.yaml'), 'utf8'),
      'trial-stages.yaml',
      catalog,
    );
    const job = store.submitJob(spec);
    store.setJobState(job.id, 'starting');
    store.setJobState(job.id, 'running');
    const passed = (completed: number): number | undefined => {
      store.recordJobProgress(job.id, completed, 4200);
      // Prepared (its tasks report running): a running job that is not is pinned, and a pinned job with tasks on no
      // instance, as here, is left out of the round's snapshot.
      const inputs = { ...readSnapshotInputs(store, 100), preparedSince: new Map([[job.id, 100]]) };
      return admissionInfo(inputs, buildSnapshot(inputs), store)(job.id).success?.stagesDone;
    };
    // Stages of 600, 1200 and 2400 s: the first ends at 600 s of 4200, the second at 1800.
    expect(passed(300)).toBe(0);
    expect(passed(1500)).toBe(1);
    expect(passed(2000)).toBe(2);
    expect(passed(4100)).toBe(2);
  });
});
