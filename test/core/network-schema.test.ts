import { describe, expect, it } from 'vitest';
import {
  acceptedNetworkDeclarationSchema,
  networkDeclarationInput,
  networkDeclarationSchema,
  toNetworkDeclaration,
} from '../../src/core/network-schema.js';
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

  it('refuses a performance above the previous point’s, naming the point', () => {
    expect(
      problemsOf({
        sensitivity: [
          [0, 0.2],
          [1000, 1],
        ],
      }),
    ).toEqual([
      'sensitivity.1: relative performance must not rise with latency: 1 at 1000 µs is above 0.2 at 0 µs',
    ]);
    expect(
      problemsOf({
        sensitivity: [
          [0, 1],
          [100, 0.5],
          [200, 0.6],
          [300, 0.4],
        ],
      }),
    ).toEqual([
      'sensitivity.2: relative performance must not rise with latency: 0.6 at 200 µs is above 0.5 at 100 µs',
    ]);
    // Flat stretches fall by nothing: accepted.
    expect(
      problemsOf({
        sensitivity: [
          [0, 1],
          [100, 1],
          [200, 0.5],
          [300, 0.5],
        ],
      }),
    ).toEqual([]);
  });

  it('restores a rising table a controller accepted before, and writes it out as one accepted now', () => {
    const rising = {
      sensitivity: [
        [0, 0.2],
        [500, 0.001],
        [1000, 1],
      ],
    };
    const accepted = acceptedNetworkDeclarationSchema.safeParse(rising);
    expect(accepted.success).toBe(true);
    if (!accepted.success) return;
    const written = networkDeclarationInput(toNetworkDeclaration(accepted.data));
    expect(written.sensitivity).toEqual([
      [0, 0.2],
      [500, 0.01],
      [1000, 0.01],
    ]);
    expect(problemsOf(written)).toEqual([]);
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
