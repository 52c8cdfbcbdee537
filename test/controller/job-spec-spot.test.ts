import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import { ValidationError } from '../../src/core/validation.js';

const catalog = loadCatalogFile();

const spec = (spot: string) => `
name: train
team: ml
tasks:
  - image: trainer:1
    demand: [1, 8, 30]
${spot}
`;

describe("a job spec's spot field", () => {
  it('takes never, allowed or preferred, and leaves it absent (allowed) when not written', () => {
    expect(parseJobSpec(spec('spot: never'), 'spec.yaml', catalog).spot).toBe('never');
    expect(parseJobSpec(spec('spot: preferred'), 'spec.yaml', catalog).spot).toBe('preferred');
    expect(parseJobSpec(spec(''), 'spec.yaml', catalog).spot).toBeUndefined();
  });

  it('rejects another value, naming the field and the choices', () => {
    try {
      parseJobSpec(spec('spot: sometimes'), 'spec.yaml', catalog);
      throw new Error('expected the spec to be rejected');
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      expect((e as ValidationError).problems.join('\n')).toMatch(/spot.*never, allowed, preferred/);
    }
  });
});

describe("a job spec's spotMaxDelayMinutes", () => {
  it('is the bound in seconds, and a non-positive or non-numeric value is rejected naming the field', () => {
    expect(parseJobSpec(spec('spotMaxDelayMinutes: 15'), 'spec.yaml', catalog).spotMaxDelaySeconds).toBe(900);
    expect(parseJobSpec(spec(''), 'spec.yaml', catalog).spotMaxDelaySeconds).toBeUndefined();
    for (const bad of ['spotMaxDelayMinutes: 0', 'spotMaxDelayMinutes: soon']) {
      try {
        parseJobSpec(spec(bad), 'spec.yaml', catalog);
        throw new Error('expected the spec to be rejected');
      } catch (e) {
        expect(e).toBeInstanceOf(ValidationError);
        expect((e as ValidationError).problems.join('\n')).toMatch(/spotMaxDelayMinutes/);
      }
    }
  });
});
