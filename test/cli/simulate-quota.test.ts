/**
 * `simulate --quota` with a controller config's `caps.quotas` (`--config`): a flag's quota for a group replaces the
 * config's for that group, as the other cap flags replace theirs, and a quota no job can fit under is refused naming
 * where it was set: the flag as typed, or the config file's entry.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { ValidationError } from '../../src/core/validation.js';
import { executeControllerRun } from '../../src/sim/controller-runtime/execute.js';
import { executeRun, type RunRequest } from '../../src/sim/run-request.js';
import { checkEveryJobAdmissible } from '../../src/world/never-fits.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-simulate-quota-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function config(name: string, quotas: readonly string[]): string {
  const path = join(scratch, name);
  writeFileSync(
    path,
    ['cluster: q', 'stateDir: st', 'caps:', '  quotas:', ...quotas.map((q) => `    - ${q}`), ''].join('\n'),
  );
  return path;
}

// 20 Alibaba jobs (seed 1): 8 of them need a p3.8xlarge alone, 4 GPUs in group p.
const plan = (...args: string[]) =>
  simulationPlan(
    parseSimulateArgs(
      [
        '--scheduler',
        'no-packing',
        '--format',
        'alibaba',
        '--jobs',
        '20',
        '--seed',
        '1',
        '--no-predict',
        ...args,
      ],
      'test',
    ),
  );
const request = (...args: string[]) => plan(...args).requests[0] as RunRequest;

function failure(run: () => unknown): ValidationError {
  try {
    run();
  } catch (e) {
    if (e instanceof ValidationError) return e;
    throw e;
  }
  throw new Error('expected a ValidationError');
}

const FOUR_GPU_JOBS = /^8 of 20 jobs can never be admitted: .*\(4 GPUs in group p\)/;

describe('simulate --quota over a controller config', () => {
  const cfg = config('p4.yaml', ['{ group: p, maxGpus: 4 }', '{ group: standard, maxVcpus: 512 }']);

  it("replaces the config's quota for the flag's group and keeps the config's other groups", () => {
    const p = plan('--config', cfg, '--quota', 'p:gpus=100');
    expect(p.queue?.caps.quotas).toEqual([
      { group: 'standard', maxVcpus: 512, source: `${cfg}: caps.quotas.1 (group standard, maxVcpus 512)` },
      { group: 'p', maxGpus: 100, source: '--quota p:gpus=100' },
    ]);
    // What the report lists as the run's quotas.
    expect(p.quotas.map((q) => q.group)).toEqual(['standard', 'p']);
  });

  it('holds the runs of the controller runtime to the flag too', () => {
    const controller = request('--config', cfg, '--quota', 'p:gpus=100', '--runtime', 'controller');
    expect(controller.controllerSettings?.caps.quotas).toContainEqual(
      expect.objectContaining({ group: 'p', maxGpus: 100 }),
    );
    expect(controller.controllerSettings?.caps.quotas).not.toContainEqual(
      expect.objectContaining({ group: 'p', maxGpus: 4 }),
    );
  });

  it('lets a flag loosen a config quota no job could fit under', () => {
    const tight = config('p2.yaml', ['{ group: p, maxGpus: 2 }']);
    expect(failure(() => executeRun(request('--config', tight))).problems[0]).toMatch(FOUR_GPU_JOBS);
    const loosened = plan('--config', tight, '--quota', 'p:gpus=4');
    expect(loosened.queue?.caps.quotas).toEqual([{ group: 'p', maxGpus: 4, source: '--quota p:gpus=4' }]);
    // Every job fits under it: the run starts.
    expect(() =>
      checkEveryJobAdmissible(loosened.trace, loosened.catalog, loosened.queue?.caps ?? {}, 'standalone'),
    ).not.toThrow();
  });

  it('refuses two --quota for one group, and a key given twice in one', () => {
    expect(() => plan('--quota', 'p:gpus=2', '--quota', 'p:gpus=100')).toThrow(/group p given twice/);
    expect(() => plan('--quota', 'p:gpus=2,gpus=100')).toThrow(/gpus given twice/);
    expect(() => plan('--quota', 'p:gpus=1.5')).toThrow(
      /"gpus=1.5" is not vcpus=N or gpus=N with N a whole number/,
    );
  });
});

describe('a quota no job can fit under, refused naming where it was set', () => {
  it("names the config file's entry, not a flag the user never typed", () => {
    const tight = config('p2-named.yaml', ['{ group: standard, maxVcpus: 512 }', '{ group: p, maxGpus: 2 }']);
    const e = failure(() => executeRun(request('--config', tight)));
    expect(e.source).toBe(`${tight}: caps.quotas.1 (group p, maxGpus 2)`);
    expect(e.problems[0]).toMatch(FOUR_GPU_JOBS);
  });

  it('names the flag as typed', () => {
    const e = failure(() => executeRun(request('--quota', 'P:vcpus=512, gpus=2')));
    expect(e.source).toBe('--quota P:vcpus=512, gpus=2');
    expect(e.problems[0]).toMatch(FOUR_GPU_JOBS);
  });

  it('names the config entry in the controller runtime too, before the controller starts', async () => {
    const tight = config('p2-controller.yaml', ['{ group: p, maxGpus: 2 }']);
    const e: unknown = await executeControllerRun(
      request('--config', tight, '--runtime', 'controller'),
    ).catch((error: unknown) => error);
    expect(e).toBeInstanceOf(ValidationError);
    expect((e as ValidationError).source).toBe(`${tight}: caps.quotas.0 (group p, maxGpus 2)`);
    expect((e as ValidationError).problems[0]).toMatch(FOUR_GPU_JOBS);
  });
});
