import { describe, expect, it } from 'vitest';
import { networkDeclarationSchema } from '../../src/core/network-schema.js';
import { describeIssues, ValidationError } from '../../src/core/validation.js';
import { parseFleetwiseTrace } from '../../src/sim/traces/fleetwise-json.js';

const problemsOf = (value: unknown): string[] => {
  const result = networkDeclarationSchema.safeParse(value);
  return result.success ? [] : describeIssues(result.error);
};

describe("a network declaration's latency table", () => {
  it('refuses a performance below a 100× slowdown, naming the point', () => {
    expect(problemsOf({ sensitivity: [[0, 0.000001]] })).toEqual([
      'sensitivity.0: relative performance must be at least 0.01 (a 100× slowdown), got 0.000001: below it a job ' +
        'placed badly all but stops',
    ]);
    expect(
      problemsOf({
        sensitivity: [
          [0, 1],
          [100, 0.5],
          [200, 0.009],
        ],
      }),
    ).toEqual([
      'sensitivity.2: relative performance must be at least 0.01 (a 100× slowdown), got 0.009: below it a job placed ' +
        'badly all but stops',
    ]);
    expect(
      problemsOf({
        sensitivity: [
          [0, 1],
          [500, 0.01],
        ],
      }),
    ).toEqual([]);
  });

  it('is named by its place in a fleetwise trace', () => {
    const task = (name: string) => ({ name, workload: 'resnet18', demand: { any: [0, 2, 4] } });
    const text = JSON.stringify({
      format: 'fleetwise-trace/v1',
      jobs: [
        {
          id: 'job-1',
          name: 'r',
          workload: 'resnet18',
          arrivalSeconds: 0,
          durationSeconds: 600,
          tasks: [task('a'), task('b')],
          network: { sensitivity: [[0, 1e-6]], root: 'a', gibPerHour: 10 },
        },
      ],
    });
    const error = (() => {
      try {
        parseFleetwiseTrace(text, 'tiny.json');
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).problems).toEqual([
      'jobs.0.network.sensitivity.0: relative performance must be at least 0.01 (a 100× slowdown), got 0.000001: ' +
        'below it a job placed badly all but stops',
    ]);
  });
});
