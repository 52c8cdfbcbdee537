/**
 * The layering lint rules of eslint.config.js (ARCHITECTURE.md "Layers") bite: for every rule, a forbidden import in a
 * file of that directory is an error naming the rule, and an allowed one is not, however the specifier spells the
 * path. Sources are linted in memory with the repository's own config, so the test checks the config as
 * `npm run lint` uses it.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ESLint, type Linter } from 'eslint';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const eslint = new ESLint({ cwd: ROOT, overrideConfigFile: join(ROOT, 'eslint.config.js') });
const LAYER_RULES = new Set(['fleetwise/layers', 'no-restricted-globals']);

async function lint(code: string, filePath: string): Promise<Linter.LintMessage[]> {
  const [result] = await eslint.lintText(code, { filePath: join(ROOT, filePath) });
  if (result === undefined) throw new Error(`no lint result for ${filePath}`);
  return result.messages;
}

/** Static, re-exporting, type-only and dynamic forms: each must be caught on its own. */
const FORMS: readonly [string, (spec: string) => string][] = [
  ['import', (spec) => `import * as m from '${spec}';\nexport { m };\n`],
  ['export from', (spec) => `export * from '${spec}';\n`],
  ['import type', (spec) => `import type { T } from '${spec}';\nexport type U = T;\n`],
  ['dynamic import()', (spec) => `export const m = await import('${spec}');\n`],
  ['dynamic import() of a template', (spec) => `export const m = await import(\`${spec}\`);\n`],
  ['import() type', (spec) => `export type U = import('${spec}').T;\n`],
];

interface Case {
  /** The importing file (need not exist). */
  readonly file: string;
  readonly forbidden: readonly string[];
  readonly allowed: readonly string[];
  /** The rule's own words, which every violation's message must contain (when something is forbidden). */
  readonly message?: RegExp;
}

const PURE_IO = [
  'node:fs',
  'fs',
  'node:fs/promises',
  'fs/promises',
  'node:child_process',
  'child_process',
  'node:net',
  'net',
  'node:http',
  'https',
  'node:https',
  'node:dgram',
  'node:worker_threads',
  'worker_threads',
  'node:os',
  'os',
  'node:process',
  'process',
  'node:module',
  'module',
  'node:tty',
  'tty',
  'node:repl',
  'repl',
  'node:wasi',
  'node:sqlite',
  'node:vm',
  'node:v8',
  'node:console',
  'node:test',
  '_http_client',
  'better-sqlite3',
  '@aws-sdk/client-ec2',
  '@aws-sdk/lib-storage',
  'dockerode',
  'fastify',
  '@fastify/static',
  'pino',
  'pino-pretty',
  'pino/file',
  'pg',
  'pg-native',
  'playwright-core',
  'playwright',
  'prom-client',
  'tar-stream',
];
const PURE_ALLOWED_PACKAGES = ['zod', 'glpk.js', 'glpk.js/node', 'node:path'];

const CASES: readonly Case[] = [
  {
    file: 'src/core/x.ts',
    forbidden: ['../scheduler/a.js', '../queue/a.js', '../sim/a.js', '../controller/a.js', '../cloud/a.js'],
    allowed: ['./a.js', '../core/a.js', ...PURE_ALLOWED_PACKAGES],
    message: /core may import only core \(dependencies point inward/,
  },
  {
    file: 'src/scheduler/baselines/x.ts',
    forbidden: ['../../queue/a.js', '../../round/a.js', '../../sim/a.js', '../../storage/a.js'],
    allowed: ['../types.js', './common.js', '../../core/a.js', ...PURE_ALLOWED_PACKAGES],
    message: /scheduler may import only core, scheduler \(/,
  },
  {
    file: 'src/queue/x.ts',
    forbidden: ['../round/a.js', '../world/a.js', '../predict/a.js', '../controller/a.js'],
    allowed: ['../scheduler/a.js', '../core/a.js', './a.js'],
    message: /queue may import only core, scheduler, queue \(/,
  },
  {
    file: 'src/round/x.ts',
    forbidden: ['../world/a.js', '../predict/a.js', '../sim/a.js', '../controller/a.js', '../worker/a.js'],
    allowed: ['../queue/a.js', '../scheduler/a.js', '../core/a.js', './a.js'],
    message: /round may import only core, scheduler, queue, round \(/,
  },
  {
    file: 'src/world/x.ts',
    forbidden: ['../predict/a.js', '../sim/a.js', '../cloud/provider.js', '../controller/a.js'],
    allowed: ['../round/a.js', '../queue/a.js', '../core/a.js', './a.js'],
    message: /world may import only core, scheduler, queue, round, world \(/,
  },
  {
    // A subdirectory named like a layer is not that layer: ../cloud/ from here is src/world/cloud/.
    file: 'src/world/sub/x.ts',
    forbidden: ['../../cloud/a.js', '../../predict/a.js'],
    allowed: ['../cloud/a.js', '../sim/a.js', '../../round/a.js'],
    message: /world may import only/,
  },
  {
    file: 'src/predict/x.ts',
    forbidden: ['../sim/a.js', '../controller/a.js', '../cli/a.js', '../storage/a.js'],
    allowed: ['../world/a.js', '../round/a.js', '../queue/a.js', '../scheduler/a.js', '../core/a.js'],
    message: /predict may import only core, scheduler, queue, round, world, predict \(/,
  },
  {
    file: 'src/controller/x.ts',
    forbidden: ['../sim/a.js', '../sim/traces/types.js', '../sim'],
    allowed: [
      '../round/a.js',
      '../world/a.js',
      '../predict/a.js',
      '../cloud/provider.js',
      '../storage/a.js',
      '../worker/a.js',
      './sim.js',
      'node:fs',
      'better-sqlite3',
    ],
    message: /controller must not import the simulator: put shared code in round\/, world\/ or predict\//,
  },
  {
    file: 'src/controller/api/x.ts',
    forbidden: ['../../sim/a.js'],
    allowed: ['../sim/a.js', '../../cloud/a.js'],
    message: /controller must not import the simulator/,
  },
  {
    file: 'src/controller/state/x.ts',
    forbidden: ['../../cli/a.js', '../../bench/a.js'],
    allowed: ['../x.js', '../../core/a.js'],
    message: /controller must not import cli\/ or bench\//,
  },
  {
    file: 'src/sim/x.ts',
    forbidden: ['../cli/a.js', '../bench/a.js'],
    allowed: ['../round/a.js', '../world/a.js', '../predict/a.js', '../cloud/catalog-file.js', 'node:fs'],
    message: /sim must not import cli\/ or bench\//,
  },
  {
    file: 'src/sim/traces/x.ts',
    forbidden: ['../../cli/main.js'],
    allowed: ['../../core/a.js', '../types.js'],
    message: /sim must not import cli\//,
  },
  {
    file: 'src/sim/report/x.ts',
    forbidden: ['../../controller/a.js'],
    allowed: ['../../queue/a.js'],
    message: /sim must not import the controller/,
  },
  {
    // The controller runtime drives the real controller against simulated edges; it alone may import it.
    file: 'src/sim/controller-runtime/x.ts',
    forbidden: ['../../cli/a.js'],
    allowed: ['../../controller/controller.js', '../../controller/state/x.js'],
    message: /sim must not import cli\//,
  },
  {
    file: 'src/cloud/local/x.ts',
    forbidden: [
      '../../controller/a.js',
      '../../sim/a.js',
      '../../cli/a.js',
      '../../bench/a.js',
      '../../worker/executor.js',
      '../../storage/a.js',
    ],
    allowed: [
      '../provider.js',
      '../aws/a.js',
      '../../core/a.js',
      '../../protocol/a.js',
      'node:child_process',
    ],
    message: /cloud may import only core and protocol/,
  },
  {
    file: 'src/storage/x.ts',
    forbidden: ['../controller/a.js', '../sim/a.js', '../cli/a.js', '../bench/a.js', '../worker/a.js'],
    allowed: ['../core/a.js', '../protocol/a.js', '../cloud/aws/client-config.js', '@aws-sdk/client-s3'],
    message: /storage may import only core, protocol and cloud/,
  },
  {
    file: 'src/worker/executors/x.ts',
    forbidden: [
      '../../controller/job-spec.js',
      '../../sim/a.js',
      '../../cli/a.js',
      '../../bench/a.js',
      '../../cloud/a.js',
    ],
    allowed: ['../executor.js', '../../protocol/a.js', '../../storage/a.js', '../../core/a.js', 'dockerode'],
    message: /worker may import only core, protocol and storage/,
  },
  {
    file: 'src/protocol/x.ts',
    forbidden: ['../controller/a.js', '../sim/a.js', '../cli/a.js', '../bench/a.js', '../worker/a.js'],
    allowed: ['../core/a.js', './a.js', 'zod'],
    message: /protocol may import only core/,
  },
  {
    // The outermost layers wire everything together.
    file: 'src/cli/commands/x.ts',
    forbidden: [],
    allowed: ['../../sim/a.js', '../../controller/a.js', '../../bench/a.js', 'node:fs'],
  },
  {
    // The chart kit the controller, the simulator and the benchmarks share leads back to none of them.
    file: 'src/report/x.ts',
    forbidden: [
      '../controller/clock.js',
      '../sim/run-simulation.js',
      '../bench/a.js',
      '../cli/a.js',
      '../world/a.js',
    ],
    allowed: ['./escape.js', '../core/a.js', 'echarts', 'node:fs', 'node:module'],
    message:
      /report may import only core: it draws what the controller, the simulator and the benchmarks hand it/,
  },
  {
    // Benchmarks drive the simulator and a real controller process; the CLI drives them.
    file: 'src/bench/x.ts',
    forbidden: [
      '../cli/main.js',
      '../cli/commands/bench-arms.js',
      '../cli/commands/simulate-options.js',
      '../cli/commands/simulate.js',
      '../cli',
    ],
    allowed: [
      '../cli/local-state.js',
      '../sim/a.js',
      '../controller/a.js',
      '../report/chart.js',
      '../scheduler/a.js',
      'node:fs',
    ],
    message: /bench must not import cli\/ but the state directory's file names/,
  },
  {
    // A file at any depth: its imports are resolved, not counted.
    file: 'src/controller/a/b/c/d/e/f/g/h/i/j/x.ts',
    forbidden: [`${'../'.repeat(11)}sim/a.js`],
    allowed: [`${'../'.repeat(10)}sim/a.js`],
    message: /controller must not import the simulator/,
  },
  {
    // Non-canonical paths are judged by the file they reach.
    file: 'src/core/x.ts',
    forbidden: [
      '../core/../controller/clock.js',
      '.././controller/clock.js',
      './../controller/clock.js',
      '..//controller/clock.js',
      '../%63ontroller/clock.js',
      '../core/../../src/controller/clock.js',
      '../core/%2e%2e/controller/clock.js',
      `${ROOT}src/controller/clock.js`,
      pathToFileURL(join(ROOT, 'src/controller/clock.js')).href,
    ],
    allowed: ['../controller/../core/a.js', '.././core/a.js', './/a.js', '../core/./a.js'],
    message: /is src\/controller\/clock\.js: core may import only core \(/,
  },
  {
    file: 'src/world/x.ts',
    forbidden: ['../world/../sim/run-simulation.js', './sub/../../sim/a.js'],
    allowed: ['../sim/../world/a.js', './sub/../a.js'],
    message: /is src\/sim\/.*: world may import only core, scheduler, queue, round, world \(/,
  },
  {
    file: 'src/controller/api/x.ts',
    forbidden: ['../../controller/../sim/a.js', '.././../sim/a.js', '../../sim/./a.js'],
    allowed: ['../sim/../a.js', '../../world/../round/a.js', './sim/../../sim/a.js'],
    message: /controller must not import the simulator/,
  },
  {
    // Whatever lies outside src/ (the build, the tests) or beside its directories belongs to no layer.
    file: 'src/controller/x.ts',
    forbidden: ['../../dist/sim/run-simulation.js', '../../test/a.js', '../index.js', '..'],
    allowed: [],
    message: /in no directory of src\/: import from the layers only/,
  },
  {
    // A package's subpath could climb out of it (Node resolves `pkg/../../src/x.js` against the package's
    // directory), and a URL scheme other than node: and file: names nothing the rules can place.
    file: 'src/controller/x.ts',
    forbidden: [
      'jstat/../../src/sim/a.js',
      'zod/./v4',
      'zod//v4',
      'zod/%2e%2e/x',
      'data:text/javascript,export {}',
    ],
    allowed: ['zod/v4', '@aws-sdk/client-ec2', 'node:fs/promises'],
    message: /a package specifier must name a file inside its package|URLs cannot be checked/,
  },
];

const layerMessages = (messages: Linter.LintMessage[]): Linter.LintMessage[] =>
  messages.filter((m) => m.ruleId !== null && LAYER_RULES.has(m.ruleId));

describe('layering lint rules', () => {
  for (const c of CASES)
    describe(c.file, () => {
      for (const spec of c.forbidden)
        it.each(FORMS)(`forbids %s of ${spec}`, async (_form, source) => {
          const messages = await lint(source(spec), c.file);
          expect(messages.map((m) => m.message)).toEqual([expect.stringMatching(c.message ?? /^$/)]);
          expect(messages[0]?.severity).toBe(2);
        });
      for (const spec of c.allowed)
        it.each(FORMS)(`allows %s of ${spec}`, async (_form, source) => {
          expect(layerMessages(await lint(source(spec), c.file))).toEqual([]);
        });
    });

  describe.each(['core', 'scheduler', 'queue', 'round', 'world', 'predict'])('pure layer %s', (layer) => {
    const file = `src/${layer}/x.ts`;
    const pure = new RegExp(
      `${layer} is pure \\(the controller and the simulator both run it\\): no Node I/O`,
    );

    it.each(PURE_IO)('forbids I/O module %s', async (spec) => {
      for (const [, source] of FORMS) {
        const messages = await lint(source(spec), file);
        expect(messages.map((m) => m.message)).toEqual([expect.stringMatching(pure)]);
      }
    });

    it('forbids node:crypto (randomness comes from the seeded Rng)', async () => {
      for (const spec of ['node:crypto', 'crypto', 'node:crypto/x']) {
        const messages = await lint(`import * as m from '${spec}';\nexport { m };\n`, file);
        expect(messages.map((m) => m.message)).toEqual([
          `'${spec}': ${layer} is pure: no node:crypto; use the seeded Rng of core/random.ts.`,
        ]);
      }
      // The global draws the same unseeded randomness without an import.
      const global = await lint('export const id = () => crypto.randomUUID();\n', file);
      expect(global.map((m) => [m.ruleId, m.message])).toEqual([
        [
          'no-restricted-globals',
          `Unexpected use of 'crypto'. ${layer} is pure: no node:crypto; use the seeded Rng of core/random.ts.`,
        ],
      ]);
    });

    it('forbids the globals that reach I/O without an import', async () => {
      const lines = [
        "export const a = process.env['X'];",
        "export const b = () => fetch('http://x');",
        "export const c = globalThis.process.env['X'];",
        "export const d = globalThis['process'];",
        'export const e = global.process;',
        "export const f = () => console.log('x');",
        "export const g = () => eval('process');",
        "export const h = () => new Function('return process')();",
        "export const i = () => new WebSocket('ws://x');",
      ];
      const messages = await lint(`${lines.join('\n')}\n`, file);
      expect(messages.map((m) => [m.ruleId, m.line])).toEqual(
        lines.map((_, i) => ['no-restricted-globals', i + 1]),
      );
      expect(messages.every((m) => pure.test(m.message))).toBe(true);
    });

    it('allows pure packages and the global functions that do no I/O', async () => {
      const code =
        "import { z } from 'zod';\nimport { parse } from 'yaml';\n" +
        'export const a = [z, parse, structuredClone({}), Math.max(1, 2), JSON.stringify({})];\n';
      expect(layerMessages(await lint(code, file))).toEqual([]);
    });
  });

  it('lets the edges use I/O and the process global', async () => {
    for (const file of ['src/controller/x.ts', 'src/sim/x.ts', 'src/worker/x.ts', 'src/cloud/x.ts'])
      expect(
        layerMessages(
          await lint(
            "import { readFileSync } from 'node:fs';\nexport const a = [readFileSync, process.pid];\n",
            file,
          ),
        ),
      ).toEqual([]);
  });

  it('gives every directory of src/ but cli/ a rule: none may import the CLI', async () => {
    const dirs = readdirSync(join(ROOT, 'src'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && entry.name !== 'cli')
      .map((entry) => entry.name);
    expect(dirs).toEqual(expect.arrayContaining(['report', 'bench', 'core', 'controller']));
    for (const dir of dirs) {
      const messages = await lint("export * from '../cli/main.js';\n", `src/${dir}/x.ts`);
      expect(messages.map((m) => [dir, m.ruleId])).toEqual([[dir, 'fleetwise/layers']]);
    }
  });

  it('checks import x = require(…) and refuses a module named by a computed string', async () => {
    const required = await lint("import m = require('../sim/a.js');\nexport { m };\n", 'src/controller/x.ts');
    expect(required.filter((m) => m.ruleId === 'fleetwise/layers').map((m) => m.message)).toEqual([
      expect.stringMatching(/controller must not import the simulator/),
    ]);
    for (const code of [
      "const name = '../sim/a.js';\nexport const m = await import(name);\n",
      "const dir = 'sim';\nexport const m = await import(`../${dir}/a.js`);\n",
    ])
      expect((await lint(code, 'src/controller/x.ts')).map((m) => m.message)).toEqual([
        'a module must be named by a constant string, so that its layer can be checked.',
      ]);
  });
});
