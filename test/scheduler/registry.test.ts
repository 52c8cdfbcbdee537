import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { ValidationError } from '../../src/core/validation.js';
import type { OwlScheduler } from '../../src/scheduler/baselines/owl.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import {
  createScheduler,
  NO_INTERFERENCE,
  type InterferenceProfile,
  owlOracle,
  parseSchedulerList,
  SCHEDULER_NAMES,
  workloadOfKey,
} from '../../src/scheduler/registry.js';
import { loadContentionMatrix } from '../../src/sim/traces/load.js';

const catalog = loadCatalogFile();
const interferenceProfile: InterferenceProfile = () => 0.9;

function thrown(f: () => unknown): ValidationError {
  try {
    f();
  } catch (e) {
    if (e instanceof ValidationError) return e;
    throw e;
  }
  throw new Error('expected a ValidationError');
}

describe('scheduler registry', () => {
  it('builds a fresh scheduler for every name, named as registered', () => {
    for (const name of SCHEDULER_NAMES) {
      const a = createScheduler(name, { catalog, interferenceProfile });
      const b = createScheduler(name, { catalog, interferenceProfile });
      expect(a).not.toBe(b);
      expect(a.name).toBe(name);
      const plan = a.plan({ nowSeconds: 0, jobs: [], tasks: [], instances: [] });
      expect(plan.configuration.instances).toEqual([]);
    }
  });

  it("passes Eva's default co-location rate to every Eva variant", () => {
    const eva = createScheduler('eva-rp', { catalog, interferenceProfile, evaDefaultRate: 0.8 });
    expect(eva).toBeInstanceOf(EvaScheduler);
    expect((eva as EvaScheduler).table.defaultRate).toBe(0.8);
    expect((createScheduler('eva', { catalog, interferenceProfile }) as EvaScheduler).table.defaultRate).toBe(
      0.95,
    );
  });

  it('rejects an unknown name, listing the valid ones', () => {
    const e = thrown(() => createScheduler('gavel', { catalog, interferenceProfile }));
    expect(e.source).toBe('scheduler');
    expect(e.problems[0]).toContain('"gavel"');
    for (const name of SCHEDULER_NAMES) expect(e.problems[0]).toContain(name);
  });
});

describe('--scheduler list', () => {
  it('trims, drops empties and duplicates, keeps order', () => {
    expect(parseSchedulerList(' eva, no-packing,,eva ,owl')).toEqual(['eva', 'no-packing', 'owl']);
  });

  it('reports every unknown name at once, and an empty list', () => {
    expect(thrown(() => parseSchedulerList('eva,foo,bar')).problems).toEqual([
      `unknown schedulers "foo", "bar"; valid: ${SCHEDULER_NAMES.join(', ')}`,
    ]);
    expect(thrown(() => parseSchedulerList(' , ')).problems[0]).toMatch(/^no scheduler given; valid: eva,/);
  });
});

describe("Owl's oracle", () => {
  it('maps co-location keys to workloads: the prefix before [, else the key without its task suffix', () => {
    expect(workloadOfKey('resnet18[3]_node0')).toBe('resnet18');
    expect(workloadOfKey('gpt2_node0')).toBe('gpt2');
    expect(workloadOfKey('a3c')).toBe('a3c');
  });

  it('answers with the ground truth of the workloads (contention_matrix.csv: resnet18 next to sage = 0.973)', () => {
    const matrix = loadContentionMatrix();
    const oracle = owlOracle((t, o) => matrix.rate(t, o));
    expect(oracle('resnet18[0]_node0', ['sage[4]_node0'])).toBeCloseTo(0.973, 12);
    expect(oracle('sage[4]_node0', ['resnet18[0]_node0'])).toBeCloseTo(0.853, 12);
    expect(oracle('resnet18[0]_node0', ['sage[4]_node0', 'cyclegan[9]_node0'])).toBeCloseTo(
      0.973 * 0.999,
      12,
    );
    expect(oracle('resnet18[0]_node0', [])).toBe(1);
  });

  it('sees no interference where no profile was measured (the controller)', () => {
    const owl = createScheduler('owl', { catalog, interferenceProfile: NO_INTERFERENCE }) as OwlScheduler;
    expect(owl.expectedRate('resnet18[0]_node0', ['sage[4]_node0', 'gpt2_node0'])).toBe(1);
  });
});

describe('scheduler/ layering', () => {
  it('imports only core/ and itself, so the controller and the simulator can both use the registry', () => {
    const root = join(PROJECT_ROOT, 'src', 'scheduler');
    const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
    expect(files).toContain('registry.ts');
    for (const file of files) {
      const text = readFileSync(join(root, file), 'utf8');
      for (const [, spec] of text.matchAll(/from '(\.[^']+)'/g)) {
        const target = relative(
          join(PROJECT_ROOT, 'src'),
          resolve(dirname(join(root, file)), spec as string),
        );
        expect(target, `${file} imports ${spec as string}`).toMatch(/^(core|scheduler)\//);
      }
    }
  });
});
