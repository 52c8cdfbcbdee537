import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { FamilyDemand } from '../../src/core/resources.js';
import type { SpotPreference } from '../../src/core/spot.js';
import { ValidationError } from '../../src/core/validation.js';
import type { AdmitBy } from '../../src/queue/admission.js';
import type { QueueCaps } from '../../src/queue/caps.js';
import { executeRun, loadRequestCatalog } from '../../src/sim/run-request.js';
import { checkEveryJobAdmissible, neverAdmittedJobs } from '../../src/world/never-fits.js';

/**
 * Whether a job can ever be admitted is judged as the round's admission judges it alone: its whole standalone
 * footprint (plan-cost's packing factor only applies beside other jobs), on demand unless the run buys spot and the
 * job may go on spot. A catalog's spot section alone does not open spot.
 */

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-never-fits-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

// The bundled catalog, spot section included: p3.2xlarge $3.06/h ($0.91-1.00/h on spot), p3.8xlarge $12.24/h.
const catalog = loadRequestCatalog({ spot: {} });
const P3_ONE: FamilyDemand = { p3: [1, 4, 16] };
const P3_FOUR: FamilyDemand = { p3: [4, 16, 64] };
const job = (id: string, demands: readonly FamilyDemand[], spot?: SpotPreference) => ({
  id,
  tasks: demands.map((demand) => ({ demand })),
  ...(spot === undefined ? {} : { spot }),
});
const never = (jobs: Parameters<typeof neverAdmittedJobs>[0], spot: boolean): string[] =>
  neverAdmittedJobs(jobs, catalog, { maxCostPerHour: 5 }, undefined, spot).map((n) => n.jobId);

describe('jobs the caps can never admit, judged alone', () => {
  it('refuses up front, under plan-cost admission, a gang whose tasks fit the $ cap one by one but not together', () => {
    // Two one-GPU tasks: $3.06/h each, $6.12/h together over a $5/h cap. A plan holding the job pays both instances.
    const path = join(scratch, 'gang.json');
    const t = (name: string) => ({ name, workload: 'resnet18', demand: P3_ONE });
    writeFileSync(
      path,
      JSON.stringify({
        format: 'fleetwise-trace/v1',
        name: 'gang',
        jobs: [
          { id: 'small', name: 'small', arrivalSeconds: 0, durationSeconds: 3600, tasks: [t('a')] },
          { id: 'gang2', name: 'gang2', arrivalSeconds: 10, durationSeconds: 3600, tasks: [t('a'), t('b')] },
        ],
      }),
    );
    let error: unknown;
    try {
      executeRun({
        scheduler: 'eva',
        trace: { path, format: 'fleetwise' },
        queue: { kind: 'fifo', caps: { maxCostPerHour: 5 }, predict: false, admitBy: 'plan-cost' },
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ValidationError);
    const e = error as ValidationError;
    expect(e.source).toBe('--cap-dollars-per-hour 5');
    expect(e.problems).toEqual([
      expect.stringMatching(
        /^1 of 2 jobs can never be admitted: alone, each needs more than the cap .*: gang2 \(\$6\.12\/h\);/,
      ),
    ]);
  });

  it('prices a job on demand while the run buys no spot, though the catalog has a spot market', () => {
    // One p3.8xlarge: $12.24/h on demand, under $4/h on spot.
    expect(never([job('big', [P3_FOUR])], false)).toEqual(['big']);
    expect(never([job('big', [P3_FOUR])], true)).toEqual([]);
  });

  it('prices it on demand when it refuses spot, and names the spot price when it is over the cap there too', () => {
    expect(never([job('od', [P3_FOUR], 'never')], true)).toEqual(['od']);
    const [gang] = neverAdmittedJobs(
      [
        job(
          'gang6',
          Array.from({ length: 6 }, () => P3_ONE),
        ),
      ],
      catalog,
      { maxCostPerHour: 5 },
      undefined,
      true,
    );
    expect(gang?.caps).toEqual(['maxCostPerHour']);
    expect(gang?.footprint.instances.every((i) => i.market === 'spot')).toBe(true);
  });

  it('refuses a quota no job fits under naming where it was set, else the flag that sets it', () => {
    const trace = { jobs: [job('four', [P3_FOUR])] };
    const refusal = (quota: { group: string; maxGpus: number; source?: string }): ValidationError => {
      try {
        checkEveryJobAdmissible(trace, catalog, { quotas: [quota] }, 'standalone');
      } catch (e) {
        if (e instanceof ValidationError) return e;
        throw e;
      }
      throw new Error('expected a ValidationError');
    };
    const entry = 'fleetwise.yaml: caps.quotas.0 (group p, maxGpus 2)';
    expect(refusal({ group: 'p', maxGpus: 2, source: entry }).source).toBe(entry);
    expect(refusal({ group: 'p', maxGpus: 2 }).source).toBe('--quota p:gpus=2');
    expect(refusal({ group: 'p', maxGpus: 2 }).problems[0]).toMatch(
      /^1 of 1 jobs can never be admitted: .*four \(4 GPUs in group p\)/,
    );
  });

  it('refuses a $ or instance cap no job fits under naming the file that set it, and the sizing with its file', () => {
    // Two one-GPU tasks: $6.12/h and 2 instances alone.
    const trace = { jobs: [job('gang2', [P3_ONE, P3_ONE])] };
    const refusal = (caps: QueueCaps, admitBy: AdmitBy): ValidationError => {
      try {
        checkEveryJobAdmissible(trace, catalog, caps, admitBy);
      } catch (e) {
        if (e instanceof ValidationError) return e;
        throw e;
      }
      throw new Error('expected a ValidationError');
    };
    const sources = {
      maxCostPerHour: 'tuned.yaml: caps.maxCostPerHour (5)',
      maxInstances: 'fleetwise.yaml: caps.maxInstances (1)',
      admitBy: 'tuned.yaml: caps.admitBy',
    };
    const dollars = refusal({ maxCostPerHour: 5, sources }, 'plan-cost');
    expect(dollars.source).toBe(sources.maxCostPerHour);
    expect(dollars.problems[0]).toContain('under admitBy plan-cost (from tuned.yaml: caps.admitBy) too:');
    expect(dollars.problems[0]).toMatch(/gang2 \(\$6\.12\/h\)/);
    expect(refusal({ maxInstances: 1, sources }, 'standalone').source).toBe(sources.maxInstances);
    // Both at once: one problem each, named where each was set.
    expect(refusal({ maxCostPerHour: 5, maxInstances: 1, sources }, 'standalone').problems).toEqual([
      expect.stringMatching(/^tuned\.yaml: caps\.maxCostPerHour \(5\): 1 of 1 jobs/),
      expect.stringMatching(
        /^fleetwise\.yaml: caps\.maxInstances \(1\): 1 of 1 jobs .*gang2 \(2 instances\)/,
      ),
    ]);
    // Without sources, the flags that set them.
    const flagged = refusal({ maxCostPerHour: 5 }, 'plan-cost');
    expect(flagged.source).toBe('--cap-dollars-per-hour 5');
    expect(flagged.problems[0]).toContain('under --admit-by plan-cost too:');
    expect(refusal({ maxInstances: 1 }, 'standalone').source).toBe('--cap-instances 1');
  });
});
