/**
 * A controller config's quota, as the controller takes it, is named by its entry in the file: a message about a job
 * that can never fit under it names the field to change, not a `--quota` flag the controller does not have.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import { settingsFromConfig } from '../../src/controller/settings.js';
import { ValidationError } from '../../src/core/validation.js';
import { Admission } from '../../src/queue/admission.js';
import { createScheduler } from '../../src/scheduler/registry.js';
import { executeControllerRun } from '../../src/sim/controller-runtime/execute.js';
import {
  groundTruthFor,
  loadRequestCatalog,
  loadRequestTrace,
  type RunRequest,
} from '../../src/sim/run-request.js';
import { Simulation } from '../../src/world/simulation.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-config-quota-source-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

// No GPU in group p: every Eva trace job needs a P3 GPU, so none can ever be admitted.
const path = join(scratch, 'fleetwise.yaml');
writeFileSync(
  path,
  [
    'cluster: c',
    'stateDir: s',
    'caps:',
    '  quotas:',
    '    - { group: standard, maxVcpus: 512 }',
    '    - { group: p, maxGpus: 0 }',
    '',
  ].join('\n'),
);
const loaded = loadControllerConfig({ flags: { config: path }, env: {}, defaultRegion: 'us-east-1' });
// Named with the config file's path when the config says which file it came from.
const ENTRY = `${path}: caps.quotas.1 (group p, maxGpus 0)`;
const settings = settingsFromConfig({ ...loaded, file: path });

describe("a controller config's quota named by its entry", () => {
  it('labels the caps the controller runs under, with the file when the config came from one', () => {
    expect(settings.caps.quotas?.map((q) => q.source)).toEqual([
      `${path}: caps.quotas.0 (group standard, maxVcpus 512)`,
      ENTRY,
    ]);
    expect(settingsFromConfig({ ...loaded, file: undefined }).caps.quotas).toEqual([
      { group: 'standard', maxVcpus: 512, source: 'caps.quotas.0 (group standard, maxVcpus 512)' },
      { group: 'p', maxGpus: 0, source: 'caps.quotas.1 (group p, maxGpus 0)' },
    ]);
    // The config itself keeps the entries as written.
    expect(loaded.caps.quotas).toEqual([
      { group: 'standard', maxVcpus: 512 },
      { group: 'p', maxGpus: 0 },
    ]);
  });

  it('names the entry when a run stops at its time limit with jobs the quota never admits', () => {
    const request: RunRequest = { scheduler: 'eva', trace: { format: 'eva', jobs: 3 } };
    const catalog = loadRequestCatalog(request);
    const groundTruth = groundTruthFor(request);
    const sim = new Simulation({
      trace: loadRequestTrace(request, catalog),
      catalog,
      groundTruth,
      scheduler: createScheduler('eva', { catalog, interferenceProfile: groundTruth }),
      admission: new Admission(catalog, { caps: settings.caps, admitBy: settings.admitBy }),
      maxSimulatedSeconds: 20_000,
    });
    let message = '';
    try {
      sim.run();
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain(`among them jobs the caps can never admit (never-fits): ${ENTRY}: 3 of 3 jobs`);
    expect(message).not.toContain('--quota');
  });

  it('names the entry when the controller runtime refuses the run before it starts', async () => {
    const error: unknown = await executeControllerRun({
      scheduler: 'eva',
      trace: { format: 'eva', jobs: 3 },
      runtime: 'controller',
      controllerSettings: settings,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).source).toBe(ENTRY);
    expect((error as ValidationError).problems[0]).toMatch(/^3 of 3 jobs can never be admitted: .*GPU/);
  });
});
