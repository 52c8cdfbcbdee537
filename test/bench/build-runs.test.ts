import { describe, expect, it } from 'vitest';
import { parseBuildOutput } from '../../src/bench/build-runs.js';

describe("another build's simulate answer", () => {
  it("keeps the record, named by the bench's label", () => {
    const figures = parseBuildOutput(
      JSON.stringify({ runs: [{ scheduler: 'eva', totalCost: 12.5, p99JctHours: null, jobs: 3 }] }),
      'seed 5 before',
    );
    expect(figures).toEqual({ scheduler: 'seed 5 before', totalCost: 12.5, p99JctHours: null, jobs: 3 });
  });

  it('names the run and what was wrong', () => {
    expect(() => parseBuildOutput('simulate: done\n', 'seed 5 b')).toThrow(
      'seed 5 b: the build printed no JSON (simulate: done)',
    );
    expect(() => parseBuildOutput('{"rows":[]}', 'seed 5 b')).toThrow(
      /seed 5 b: the build's JSON is not a simulate answer: runs: /,
    );
    expect(() => parseBuildOutput('{"runs":[{"totalCost":"12"}]}', 'seed 5 b')).toThrow(
      /not a simulate answer: runs\.0\.totalCost: /,
    );
    expect(() => parseBuildOutput('{"runs":[{},{}]}', 'seed 5 b')).toThrow('seed 5 b: asks for 2 runs');
    expect(() => parseBuildOutput('{"runs":[]}', 'seed 5 b')).toThrow('seed 5 b: asks for 0 runs');
  });
});
