import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import { COUNTER_SPEC, writeShortCounterSpec } from '../helpers/counter-spec.js';

/** Seconds the counter runs for, from its env (steps × step time; the shell's overhead only adds to it). */
function runSeconds(specPath: string): number {
  const spec = parseJobSpec(readFileSync(specPath, 'utf8'), specPath, loadCatalogFile());
  const env = spec.tasks[0]?.env ?? {};
  return Number(env.COUNT_TO) * Number(env.STEP_SECONDS);
}

describe('the quick-start counter', () => {
  it('runs for minutes, long enough to try drain on it, and says so', () => {
    expect(runSeconds(COUNTER_SPEC)).toBeGreaterThanOrEqual(150);
    const spec = parseJobSpec(readFileSync(COUNTER_SPEC, 'utf8'), COUNTER_SPEC, loadCatalogFile());
    expect(spec.totalIterations).toBe(Number(spec.tasks[0]?.env.COUNT_TO));
    expect(spec.description).toMatch(/about 3 minutes/);
  });

  it('is shortened for tests, every override landing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleetwise-counter-'));
    try {
      const path = writeShortCounterSpec(join(dir, 'counter.yaml'), {
        countTo: 120,
        stepSeconds: 0.04,
        checkpointSeconds: 1,
      });
      expect(runSeconds(path)).toBeCloseTo(4.8);
      expect(readFileSync(path, 'utf8')).toMatch(/totalIterations: 120\n/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
