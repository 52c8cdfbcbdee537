import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/core/validation.js';
import {
  arrivalsIndexName,
  gapArrivals,
  isSpecFileName,
  parseArrivals,
} from '../../../src/sim/traces/spec-arrivals.js';

const FILES = ['a.yaml', 'b.json', 'c.yml'];

function problemsOf(text: string): string[] {
  try {
    parseArrivals(text, 'dir/arrivals.yaml', FILES);
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    expect((e as ValidationError).source).toBe('dir/arrivals.yaml');
    return [...(e as ValidationError).problems];
  }
  throw new Error('expected a validation error');
}

describe('arrivals of a directory of job specs', () => {
  it('reads seconds and durations per file', () => {
    const arrivals = parseArrivals('a.yaml: 0\nb.json: 90\nc.yml: 1h30m\n', 'arrivals.yaml', FILES);
    expect([...arrivals]).toEqual([
      ['a.yaml', 0],
      ['b.json', 90],
      ['c.yml', 5400],
    ]);
  });

  it('refuses an arrival past the trace bound naming the arrivals file and entry, not the trace built from it', () => {
    expect(problemsOf('a.yaml: 1e15\nb.json: 1\nc.yml: 2\n')).toEqual([
      'a.yaml: at most 315360000 s (ten years) after the trace starts',
    ]);
    expect(() => gapArrivals(FILES, 1e15)).toThrow(
      /^--arrival-gap-seconds: 1000000000000000 s between 3 job spec files puts the last, c\.yml, at 2000000000000000 s/,
    );
    expect(gapArrivals(FILES, 1e8).get('c.yml')).toBe(2e8);
  });

  it('refuses unknown and missing files, bad values and other shapes, naming the file', () => {
    expect(problemsOf('a.yaml: 0\nb.json: 1\nc.yml: 2\nd.yaml: 3\n')).toEqual([
      'd.yaml: no such job spec file in the directory (it has a.yaml, b.json, c.yml)',
    ]);
    expect(problemsOf('a.yaml: 0\n')).toEqual([
      'b.json: missing: every job spec file needs an arrival',
      'c.yml: missing: every job spec file needs an arrival',
    ]);
    expect(problemsOf('a.yaml: soon\nb.json: 1\nc.yml: 2\n')[0]).toMatch(
      /^a\.yaml: expected seconds or a duration/,
    );
    expect(problemsOf('a.yaml: -5\nb.json: 1\nc.yml: 2\n')[0]).toMatch(/^a\.yaml: must be 0 seconds or more/);
    expect(problemsOf('- a.yaml\n')[0]).toMatch(/expected a map of job spec file/);
    expect(problemsOf('')[0]).toMatch(/empty/);
    expect(problemsOf('a.yaml: 1\na.yaml: 2\n')[0]).toMatch(/not valid YAML/);
  });

  it('without an index: the files in order, a gap apart', () => {
    expect([...gapArrivals(FILES, 60)]).toEqual([
      ['a.yaml', 0],
      ['b.json', 60],
      ['c.yml', 120],
    ]);
    expect(() => gapArrivals(FILES, -1)).toThrow(/0 seconds or more/);
  });

  it('finds the one arrivals index of a directory, and refuses two, naming the directory and both', () => {
    expect(arrivalsIndexName(['a.yaml', 'arrivals.yml', 'b.json'], 'dir')).toBe('arrivals.yml');
    expect(arrivalsIndexName(['a.yaml', 'b.json'], 'dir')).toBeUndefined();
    for (const names of [
      ['arrivals.yaml', 'arrivals.yml'],
      ['Arrivals.YAML', 'a.yaml', 'arrivals.yaml'],
    ]) {
      const error = (() => {
        try {
          arrivalsIndexName(names, 'dir');
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).source).toBe('dir');
      expect((error as ValidationError).problems).toEqual([
        `${names.filter((n) => n.toLowerCase().startsWith('arrivals')).join(' and ')} both say when the jobs arrive: keep one`,
      ]);
    }
  });

  it('takes YAML and JSON files as specs, but not the index', () => {
    expect(
      ['a.yaml', 'b.YML', 'c.json', 'arrivals.yaml', 'arrivals.yml', 'notes.md'].filter(isSpecFileName),
    ).toEqual(['a.yaml', 'b.YML', 'c.json']);
  });
});
