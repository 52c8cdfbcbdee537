import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { ValidationError } from '../../src/core/validation.js';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import { configuredSchedulerFactory } from '../../src/controller/configured-scheduler.js';
import { settingsFromConfig } from '../../src/controller/settings.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import type { OwlScheduler } from '../../src/scheduler/baselines/owl.js';
import type { EvaScheduler } from '../../src/scheduler/eva.js';
import { SCHEDULER_NAMES } from '../../src/scheduler/registry.js';
import { freePort } from '../helpers/test-ports.js';
import { catalog, CPU_SMALL, FakeCloud, jobSpec, rig } from './controller-fixtures.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-configured-scheduler-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function configFile(name: string, lines: readonly string[]): string {
  const path = join(scratch, name);
  writeFileSync(path, ['cluster: c', 'stateDir: s', 'dryRun: true', ...lines].join('\n'));
  return path;
}

function load(flags: Parameters<typeof loadControllerConfig>[0]['flags']) {
  return loadControllerConfig({ flags, env: {}, defaultRegion: 'us-east-1' });
}

function problemsOf(fn: () => unknown): readonly string[] {
  try {
    fn();
  } catch (e) {
    if (e instanceof ValidationError) return e.problems;
    throw e;
  }
  throw new Error('expected a ValidationError');
}

describe('the scheduler a controller configuration names', () => {
  it('plans every round with it, and builds it again for repriced catalogs', async () => {
    const config = load({ config: configFile('karpenter.yaml', ['scheduler:', '  name: karpenter']) });
    expect(config.scheduler.name).toBe('karpenter');
    const schedulerFor = configuredSchedulerFactory(config);
    const cloud = new FakeCloud();
    const { controller, store } = rig(settingsFromConfig(config), {
      cloud,
      provider: cloud,
      scheduler: schedulerFor(catalog),
      schedulerFor,
    });
    await controller.recover();
    controller.submit(jobSpec('small', CPU_SMALL), 'research');
    const outcome = await controller.runRound();
    expect(outcome.notApplied).toBe('dry run');
    expect(outcome.actions.map((a) => a.kind)).toEqual(['launch-instance', 'start-task']);
    expect(store.latestRound()?.decision.scheduler).toBe('karpenter');

    const before = controller.scheduler;
    await controller.applyCatalog({ ...catalog });
    expect(controller.scheduler).not.toBe(before);
    await controller.runRound();
    expect(store.latestRound()?.decision.scheduler).toBe('karpenter');
  });

  it('defaults to Eva, with the configured tunables', () => {
    expect(load({ cluster: 'c', stateDir: 's' }).scheduler.name).toBe('eva');
    const config = load({
      config: configFile('eva.yaml', ['scheduler:', '  name: eva-rp', '  defaultRate: 0.8']),
    });
    const eva = configuredSchedulerFactory(config)(catalog) as EvaScheduler;
    expect(eva.name).toBe('eva-rp');
    expect(eva.table.defaultRate).toBe(0.8);
  });

  it('accepts every registered name; Owl, without a measured profile, expects no interference', () => {
    for (const name of SCHEDULER_NAMES)
      expect(
        configuredSchedulerFactory(load({ cluster: 'c', stateDir: 's', scheduler: name }))(catalog).name,
      ).toBe(name);
    const owl = configuredSchedulerFactory(load({ cluster: 'c', stateDir: 's', scheduler: 'owl' }))(
      catalog,
    ) as OwlScheduler;
    expect(owl.expectedRate('a_main', ['b_main'])).toBe(1);
  });

  it('refuses an unknown name, naming the field and the valid names', () => {
    const valid = SCHEDULER_NAMES.join(', ');
    expect(
      problemsOf(() => load({ config: configFile('gavel.yaml', ['scheduler:', '  name: gavel']) })),
    ).toEqual([`scheduler.name (line 5): unknown scheduler "gavel"; valid: ${valid}`]);
    expect(problemsOf(() => load({ cluster: 'c', stateDir: 's', scheduler: 'gavel' }))).toEqual([
      `--scheduler: unknown scheduler "gavel"; valid: ${valid}`,
    ]);
  });
});

describe('fleetwise controller --scheduler (the built CLI, dry run)', () => {
  it('records karpenter as the scheduler of its rounds', async () => {
    const main = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');
    if (!existsSync(main)) throw new Error(`${main} is missing: run "npm run build" first (npm test does)`);
    const stateDir = join(scratch, 'cli-state');
    const port = await freePort();
    const admin = 'configured-scheduler-admin-token-0123';
    const child = spawn(
      process.execPath,
      [
        main,
        'controller',
        '--dry-run',
        '--cluster',
        'sched',
        '--region',
        'us-east-1',
        '--state-dir',
        stateDir,
        '--listen',
        `127.0.0.1:${port}`,
        '--round-seconds',
        '1',
        '--scheduler',
        'karpenter',
      ],
      { env: { ...process.env, FLEETWISE_ADMIN_TOKEN: admin }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    try {
      const until = async (what: string, check: () => Promise<boolean> | boolean): Promise<void> => {
        const deadline = Date.now() + 20_000;
        while (!(await check())) {
          if (Date.now() > deadline || child.exitCode !== null)
            throw new Error(`timed out waiting for ${what}:\n${output.slice(-3000)}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      };
      await until('the API', () => output.includes('API http://'));
      const submitted = await fetch(`http://127.0.0.1:${port}/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          name: 'small',
          team: 'research',
          tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 4, 8] } }],
        }),
      });
      expect(submitted.status).toBe(201);
      const store = new SqliteStateStore(join(stateDir, 'state.db'));
      try {
        await until(
          'a round that planned the job',
          () => (store.latestRound()?.configuration.instances.length ?? 0) > 0,
        );
        expect(store.latestRound()?.decision.scheduler).toBe('karpenter');
      } finally {
        store.close();
      }
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
    expect(output).toContain('scheduler: karpenter');
  }, 40_000);
});
