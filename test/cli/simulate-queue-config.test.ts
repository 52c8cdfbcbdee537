/**
 * `simulate --queue-config` with what `fleetwise tune` prints: the queue, and the caps and `admitBy` it was tuned
 * under, and the behaviours it turned off (tune's runs have co-start, placement between rounds, binding and
 * make-before-break on unless told otherwise, as a controller config has them; those the file leaves out are left to
 * simulate's flags, or a controller config's).
 */
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseSimulateArgs } from '../../src/cli/commands/simulate.js';
import { simulationPlan } from '../../src/cli/commands/simulate-plan.js';
import { BUNDLED_CATALOG_PATH } from '../../src/cloud/catalog-file.js';
import type { Catalog } from '../../src/core/catalog.js';
import { ValidationError } from '../../src/core/validation.js';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import { parseWfqConfig } from '../../src/queue/wfq.js';
import { executeControllerRun } from '../../src/sim/controller-runtime/execute.js';
import { controllerYaml } from '../../src/sim/report/tune-json.js';
import { executeRun, type RunRequest } from '../../src/sim/run-request.js';
import { refusal } from '../helpers/validation-refusal.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetwise-simulate-queue-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const tuned = join(dir, 'tuned.yaml');
writeFileSync(
  tuned,
  'queue:\n  classes:\n    - { id: all, weight: 1 }\ncaps:\n  maxCostPerHour: 20\n  admitBy: plan-cost\n',
);

function request(flags: string): RunRequest {
  return simulationPlan(parseSimulateArgs(flags.split(' '), 'test')).requests[0] as RunRequest;
}

describe('simulate --queue-config with a caps: section', () => {
  it('runs under the caps and admitBy the file says', () => {
    const queue = request(`--format eva --jobs 5 --scheduler eva --queue-config ${tuned}`).queue;
    expect(queue).toMatchObject({ kind: 'wfq', caps: { maxCostPerHour: 20 }, admitBy: 'plan-cost' });
  });

  it('lets the flags win over the file', () => {
    const queue = request(
      `--format eva --jobs 5 --scheduler eva --queue-config ${tuned} --cap-dollars-per-hour 30 --admit-by standalone`,
    ).queue;
    expect(queue).toMatchObject({ caps: { maxCostPerHour: 30 }, admitBy: 'standalone' });
  });
});

/**
 * A config as `fleetwise tune` prints it (src/cli/commands/tune.ts): the queue under its comment, the caps, then the
 * scheduler, period, catalog and prices it ran with, each written as tune writes it.
 */
function tunePrinted(
  name: string,
  settings: {
    readonly scheduler?: Record<string, unknown>;
    readonly roundSeconds?: number;
    readonly catalog?: string;
    readonly priceOverrides?: Record<string, unknown>;
  },
): string {
  const path = join(dir, name);
  const pricesFrom = join(dir, `${name}-prices.yaml`);
  writeFileSync(
    path,
    controllerYaml(
      parseWfqConfig({ classes: [{ id: 'all', weight: 1 }] }),
      'fleetwise tune: c0 (balanced) on pai_200, no-packing under $20/hour\nmean JCT 1.000 h',
    ) +
      stringify({ caps: { maxCostPerHour: 20, admitBy: 'plan-cost' } }, { lineWidth: 0 }) +
      (settings.scheduler === undefined ? '' : stringify({ scheduler: settings.scheduler })) +
      (settings.roundSeconds === undefined ? '' : stringify({ roundSeconds: settings.roundSeconds })) +
      (settings.catalog === undefined
        ? ''
        : `# the catalog simulated with, absolute: a relative path here would be read from this file's directory\n` +
          stringify({ catalog: settings.catalog }, { lineWidth: 0 })) +
      (settings.priceOverrides === undefined
        ? ''
        : `# from ${pricesFrom}\n` +
          stringify({ priceOverrides: settings.priceOverrides }, { lineWidth: 0 })),
  );
  return path;
}

const SAVINGS_PLAN = { discountPercent: 28, pricePerType: { 'p3.2xlarge': 1.99, 'c7i.large': 0.056 } };
const plan = (flags: string) => simulationPlan(parseSimulateArgs(flags.split(' '), 'test'));
const priceIn = (c: Catalog, type: string) => c.types.find((t) => t.name === type)?.costPerHour;

describe('simulate --queue-config with the scheduler, period, catalog and prices tune printed', () => {
  const catalog = join(dir, 'mine.json');
  copyFileSync(BUNDLED_CATALOG_PATH, catalog);
  const full = tunePrinted('full.yaml', {
    scheduler: { name: 'no-packing' },
    roundSeconds: 60,
    catalog,
    priceOverrides: SAVINGS_PLAN,
  });

  it('runs the policy, period, catalog and prices the file says, where no flag sets them', () => {
    const p = plan(`--format eva --jobs 5 --scheduler no-packing --queue-config ${full}`);
    const r = p.requests[0] as RunRequest;
    expect(r).toMatchObject({ scheduler: 'no-packing', roundSeconds: 60, catalogPath: catalog });
    expect(r.priceOverrides).toEqual(SAVINGS_PLAN);
    expect(priceIn(p.catalog, 'p3.2xlarge')).toBe(1.99);
    expect(r.queue).toMatchObject({ kind: 'wfq', caps: { maxCostPerHour: 20 }, admitBy: 'plan-cost' });
    // The report names them as the runs took them.
    expect(p.roundSeconds).toBe(60);
    expect(p.priceOverridesSource).toBe(`${full}: priceOverrides`);
  });

  it('lets each flag, and a controller config, win over the file', () => {
    const other = join(dir, 'half.yaml');
    writeFileSync(other, 'discountPercent: 50\n');
    const r = plan(
      `--format eva --jobs 5 --scheduler no-packing --queue-config ${full} --round-seconds 120 ` +
        `--catalog ${BUNDLED_CATALOG_PATH} --price-overrides ${other}`,
    ).requests[0] as RunRequest;
    expect(r).toMatchObject({ roundSeconds: 120, catalogPath: BUNDLED_CATALOG_PATH });
    expect(r.priceOverrides).toEqual({ discountPercent: 50 });
    const config = join(dir, 'controller.yaml');
    writeFileSync(
      config,
      'cluster: c\nstateDir: s\nroundSeconds: 30\npriceOverrides:\n  discountPercent: 10\n',
    );
    const configured = plan(
      `--format eva --jobs 5 --scheduler no-packing --queue-config ${full} --config ${config}`,
    ).requests[0] as RunRequest;
    expect(configured.roundSeconds).toBe(30);
    expect(configured.priceOverrides).toEqual({ discountPercent: 10 });
  });

  it('refuses the file beside a --scheduler without the policy its queue was tuned for, naming both', () => {
    const e = refusal(() => plan(`--format eva --jobs 5 --scheduler eva,stratus --queue-config ${full}`));
    expect(e.source).toBe(`${full}: scheduler`);
    expect(e.problems).toEqual([
      'name no-packing: the queue was tuned for no-packing, and --scheduler runs eva, stratus: add no-packing to ' +
        '--scheduler, or tune the queue for the policy run',
    ]);
    // Among other policies, it is run.
    expect(
      plan(`--format eva --jobs 5 --scheduler eva,no-packing --queue-config ${full}`).requests.map(
        (r) => r.scheduler,
      ),
    ).toEqual(['eva', 'no-packing']);
  });

  it("applies the section's Eva tunables to the runs of its policy only", () => {
    const tuned = tunePrinted('eva-rp.yaml', { scheduler: { name: 'eva-rp', paybackMargin: 4 } });
    const [eva, rp] = plan(`--format eva --jobs 5 --scheduler eva,eva-rp --queue-config ${tuned}`).requests;
    expect(rp).toMatchObject({ scheduler: 'eva-rp', evaPaybackMargin: 4 });
    expect(eva?.scheduler).toBe('eva');
    expect(eva?.evaPaybackMargin).toBeUndefined();
    // The flag over it.
    const flagged = plan(
      `--format eva --jobs 5 --scheduler eva-rp --queue-config ${tuned} --eva-payback-margin 2`,
    ).requests[0];
    expect(flagged?.evaPaybackMargin).toBe(2);
  });

  it('refuses its spot prices and spot discount without --spot on, naming the file, as a --price-overrides file', () => {
    for (const [name, overrides, field] of [
      ['spot-prices.yaml', { spotPricePerType: { 'c7i.large': 0.03 } }, 'spotPricePerType prices'],
      ['spot-discount.yaml', { spotDiscountPercent: 50 }, 'spotDiscountPercent discounts'],
    ] as const) {
      const tuned = tunePrinted(name, { priceOverrides: overrides });
      const e = refusal(() => plan(`--format eva --jobs 5 --scheduler no-packing --queue-config ${tuned}`));
      expect(e.source).toBe(`${tuned}: priceOverrides`);
      expect(e.problems).toEqual([
        `${field} spot instances: needs --spot on (without it the runs buy on demand only)`,
      ]);
      expect(
        plan(`--format eva --jobs 5 --scheduler no-packing --queue-config ${tuned} --spot on`).requests[0]
          ?.priceOverrides,
      ).toEqual(overrides);
    }
  });
});

/** A file of `lines` in the scratch directory. */
function file(name: string, lines: readonly string[]): string {
  const path = join(dir, name);
  writeFileSync(path, [...lines, ''].join('\n'));
  return path;
}

const QUEUE = ['queue:', '  classes:', '    - { id: all, weight: 1 }'];
// Tuned under 6 instances, sized standalone, rounds of 450 s.
const standalone = file('standalone.yaml', [
  ...QUEUE,
  'caps:',
  '  maxInstances: 6',
  '  admitBy: standalone',
  'roundSeconds: 450',
]);
// A controller config that says nothing of the round period or of sizing: its loader fills both in.
const dollarsOnly = file('dollars-only.yaml', [
  'cluster: x',
  'stateDir: st',
  'caps:',
  '  maxCostPerHour: 500',
]);

describe('simulate --queue-config beside a controller config', () => {
  const EVA = '--format eva --jobs 5 --scheduler eva';

  it("keeps the file's round period and admitBy where the controller config gives neither", () => {
    const p = plan(`${EVA} --queue-config ${standalone} --config ${dollarsOnly}`);
    expect(p.roundSeconds).toBe(450);
    expect(p.admitBy).toBe('standalone');
    const r = p.requests[0] as RunRequest;
    expect(r.roundSeconds).toBe(450);
    expect(r.queue).toMatchObject({ admitBy: 'standalone', caps: { maxCostPerHour: 500, maxInstances: 6 } });
    // The controller runtime runs the same settings.
    const controller = plan(
      `${EVA} --queue-config ${standalone} --config ${dollarsOnly} --runtime controller`,
    ).requests[0] as RunRequest;
    expect(controller.controllerSettings).toMatchObject({ roundSeconds: 450, admitBy: 'standalone' });
    // Without the queue config, the controller config's defaults.
    const alone = plan(`${EVA} --config ${dollarsOnly}`);
    expect([alone.roundSeconds, alone.admitBy]).toEqual([300, 'plan-cost']);
  });

  it('lets a controller config that gives them, and the flags over both, win over the file', () => {
    const explicit = file('explicit.yaml', [
      'cluster: x',
      'stateDir: st',
      'roundSeconds: 30',
      'caps:',
      '  maxInstances: 9',
      // A $ cap, which admitBy sizes jobs against (without one --admit-by is refused).
      '  maxCostPerHour: 500',
      '  admitBy: plan-cost',
    ]);
    const p = plan(`${EVA} --queue-config ${standalone} --config ${explicit}`);
    expect([p.roundSeconds, p.admitBy, p.capInstances]).toEqual([30, 'plan-cost', 9]);
    const flagged = plan(
      `${EVA} --queue-config ${standalone} --config ${explicit} --round-seconds 60 --admit-by standalone --cap-instances 2`,
    );
    expect([flagged.roundSeconds, flagged.admitBy, flagged.capInstances]).toEqual([60, 'standalone', 2]);
  });

  it('records which settings the config file and the flags gave, the flags over the file', () => {
    const loaded = loadControllerConfig({
      flags: { config: dollarsOnly, maxInstances: '4' },
      env: {},
      defaultRegion: 'us-east-1',
    });
    expect(loaded.roundSeconds).toBe(300);
    expect([...(loaded.givenBy ?? [])]).toEqual([
      ['cluster', dollarsOnly],
      ['stateDir', dollarsOnly],
      ['caps', dollarsOnly],
      ['caps.maxCostPerHour', dollarsOnly],
      ['caps.maxInstances', '--max-instances'],
    ]);
  });
});

describe('a $ cap no job fits under, set in a file', () => {
  // Every Eva trace job needs a P3 GPU, $3.06/h at least: none fits under $1/h.
  const EVA = '--format eva --jobs 20 --scheduler eva-rp';
  const oneDollar = file('one-dollar.yaml', [
    ...QUEUE,
    'caps:',
    '  maxCostPerHour: 1',
    '  admitBy: plan-cost',
  ]);
  const configured = file('one-dollar-config.yaml', [
    'cluster: x',
    'stateDir: st',
    'caps:',
    '  maxCostPerHour: 1',
  ]);

  it('is refused naming the queue config and its fields, not flags nobody typed', () => {
    const r = plan(`${EVA} --queue-config ${oneDollar}`).requests[0] as RunRequest;
    const e = refusal(() => executeRun(r));
    expect(e.source).toBe(`${oneDollar}: caps.maxCostPerHour (1)`);
    expect(e.problems).toEqual([
      expect.stringMatching(/^20 of 20 jobs can never be admitted: alone, each needs more than the cap/),
    ]);
    expect(e.problems[0]).toContain(`under admitBy plan-cost (from ${oneDollar}: caps.admitBy) too`);
    expect(e.message).not.toMatch(/--cap-|--admit-by/);
  });

  it('is refused naming the controller config, its default sizing included, in either runtime', async () => {
    const engine = refusal(() => executeRun(plan(`${EVA} --config ${configured}`).requests[0] as RunRequest));
    expect(engine.source).toBe(`${configured}: caps.maxCostPerHour (1)`);
    expect(engine.problems[0]).toContain(`under admitBy plan-cost (from ${configured}, by default) too`);
    expect(engine.message).not.toMatch(/--cap-|--admit-by/);
    const controller: unknown = await executeControllerRun(
      plan(`${EVA} --config ${configured} --runtime controller`).requests[0] as RunRequest,
    ).catch((e: unknown) => e);
    expect(controller).toBeInstanceOf(ValidationError);
    expect((controller as ValidationError).source).toBe(`${configured}: caps.maxCostPerHour (1)`);
  });

  it('is refused naming the flags when the flags set them, over either file', () => {
    const e = refusal(() =>
      executeRun(
        plan(`${EVA} --queue-config ${oneDollar} --cap-dollars-per-hour 2 --admit-by plan-cost`)
          .requests[0] as RunRequest,
      ),
    );
    expect(e.source).toBe('--cap-dollars-per-hour 2');
    expect(e.problems[0]).toContain('under --admit-by plan-cost too');
  });

  it('names an instance cap by the file that set it', () => {
    const caps = plan(`--format eva --jobs 5 --scheduler eva --queue-config ${standalone}`).queue?.caps;
    expect(caps?.sources).toEqual({ maxInstances: `${standalone}: caps.maxInstances (6)` });
    // No source for a cap a flag set: the message names the flag.
    const flagged = plan(
      `--format eva --jobs 5 --scheduler eva --queue-config ${standalone} --cap-instances 3`,
    ).queue?.caps;
    expect(flagged).toMatchObject({ maxInstances: 3 });
    expect(flagged?.sources).toBeUndefined();
  });
});

describe('simulate --queue-config with the behaviours tune printed', () => {
  const EVA = '--format eva --jobs 5 --scheduler eva';
  const allOff = file('behaviours-off.yaml', [
    ...QUEUE,
    'caps:',
    '  maxCostPerHour: 500',
    '  admitBy: plan-cost',
    'coStart: false',
    'placeBetweenRounds: false',
    'bindBetweenRounds: false',
    'makeBeforeBreak: false',
  ]);
  const allOn = file('behaviours-on.yaml', [
    ...QUEUE,
    'coStart: true',
    'placeBetweenRounds: true',
    'bindBetweenRounds: true',
    'makeBeforeBreak: true',
  ]);
  const behavioursOf = (r: RunRequest) => [
    r.starts?.coStart,
    r.starts?.placeBetweenRounds,
    r.starts?.bind,
    r.makeBeforeBreak,
  ];

  it('runs each as the file says, over a controller config that leaves it to its defaults (on)', () => {
    const p = plan(`${EVA} --queue-config ${allOff} --config ${dollarsOnly}`);
    expect(behavioursOf(p.requests[0] as RunRequest)).toEqual([false, false, false, false]);
    expect(p.behaviours.coStart.from).toBe(`${allOff}: coStart`);
    expect(p.behaviours.makeBeforeBreak.from).toBe(`${allOff}: makeBeforeBreak`);
    // The controller runtime runs them so too.
    const controller = plan(`${EVA} --queue-config ${allOff} --config ${dollarsOnly} --runtime controller`);
    expect(behavioursOf(controller.requests[0] as RunRequest)).toEqual([false, false, false, false]);
    // Without the queue config, the controller config's defaults.
    expect(behavioursOf(plan(`${EVA} --config ${dollarsOnly}`).requests[0] as RunRequest)).toEqual([
      true,
      true,
      true,
      true,
    ]);
    // On, where simulate alone runs them off.
    expect(behavioursOf(plan(`${EVA} --queue-config ${allOn}`).requests[0] as RunRequest)).toEqual([
      true,
      true,
      true,
      true,
    ]);
  });

  it('lets the flags, and a controller config that writes them, win over the file', () => {
    const flagged = plan(
      `${EVA} --queue-config ${allOff} --co-start on --place-between-rounds on --bind on --make-before-break on`,
    );
    expect(behavioursOf(flagged.requests[0] as RunRequest)).toEqual([true, true, true, true]);
    expect(flagged.behaviours.coStart.from).toBeUndefined();
    const written = file('behaviours-config.yaml', ['cluster: x', 'stateDir: st', 'coStart: true']);
    const p = plan(`${EVA} --queue-config ${allOff} --config ${written}`);
    expect(behavioursOf(p.requests[0] as RunRequest)).toEqual([true, false, false, false]);
    expect(p.behaviours.coStart.from).toBe(`${written}: coStart`);
  });

  it('refuses a value other than true or false, naming the field and its line', () => {
    const bad = file('behaviours-bad.yaml', [...QUEUE, 'coStart: sometimes']);
    const e = refusal(() => plan(`${EVA} --queue-config ${bad}`));
    expect(e.source).toBe(bad);
    expect(e.problems).toEqual([expect.stringMatching(/^coStart \(line 4\): /)]);
  });
});
