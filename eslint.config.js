// Flat config: typescript-eslint's recommended rules, with `any` forbidden (the brief: no `any` escapes), and the
// layering of ARCHITECTURE.md ("Layers") as lint errors.
import { readdirSync } from 'node:fs';
import { relative, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import tseslint from 'typescript-eslint';

/*
 * Layering. Each rule below names a directory of src/ and the top-level directories of src/ it must not import, with
 * the message a violation prints. One rule of our own (fleetwise/layers) checks every way a module names another:
 * `import`, `export … from`, type-only imports (a type import is a dependency too), `import()`, `import('…').T` in a
 * type and `import x = require('…')`.
 *
 * It resolves a relative specifier as Node does (a URL against the importing file: `.` and `..` segments, doubled
 * slashes and percent-escapes all normalized) and judges the file it lands on, never the text: `../core/../sim/x.js`
 * is the simulator, and `../cloud/x.js` from src/world/sub/ is src/world/cloud/, not the cloud layer.
 */

/** The pure layers, inward first: each may import itself and the layers before it, and no Node I/O. */
const PURE = ['core', 'scheduler', 'queue', 'round', 'world', 'predict'];
const EDGES = ['sim', 'controller', 'cloud', 'storage', 'worker', 'protocol', 'report', 'cli', 'bench'];
const SRC = fileURLToPath(new URL('./src/', import.meta.url));
/**
 * Every top-level directory of src/: the layers named here (some not created yet) and whatever exists, so that an
 * allow-list ("core imports only core") also covers a directory added later.
 */
const SRC_DIRS = [
  ...new Set([
    ...PURE,
    ...EDGES,
    ...readdirSync(SRC, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name),
  ]),
];

const only = (allowed) => SRC_DIRS.filter((dir) => !allowed.includes(dir));
const INWARD = 'dependencies point inward: core ← scheduler ← queue ← round ← world ← predict';
const DRIVERS = 'they drive it, not the reverse';

/**
 * `dir`: the importing files (src/<dir>/, subdirectories included; the longest `dir` that contains a file rules it).
 * `forbid`: directories of src/ it must not import, save the modules (paths below src/, no extension) in `except`.
 * @type {{ dir: string, forbid: { dirs: string[], message: string, except?: string[] }[], pure?: boolean }[]}
 */
const LAYER_RULES = [
  ...PURE.map((dir, i) => {
    const allowed = PURE.slice(0, i + 1);
    return {
      dir,
      pure: true,
      forbid: [{ dirs: only(allowed), message: `${dir} may import only ${allowed.join(', ')} (${INWARD}).` }],
    };
  }),
  {
    dir: 'controller',
    forbid: [
      {
        dirs: ['sim'],
        message: 'controller must not import the simulator: put shared code in round/, world/ or predict/.',
      },
      { dirs: ['cli', 'bench'], message: `controller must not import cli/ or bench/: ${DRIVERS}.` },
    ],
  },
  {
    dir: 'sim',
    forbid: [
      {
        // ARCHITECTURE.md "Layers": only sim/controller-runtime/ (the simulated edges that drive the real
        // controller) may; see its rule below.
        dirs: ['controller'],
        message:
          'sim must not import the controller (only sim/controller-runtime/, which drives it): put shared code in ' +
          'round/, world/ or predict/.',
      },
      { dirs: ['cli', 'bench'], message: `sim must not import cli/ or bench/: ${DRIVERS}.` },
    ],
  },
  {
    // Runs the real controller against simulated edges: the one part of sim/ that may import it.
    dir: 'sim/controller-runtime',
    forbid: [{ dirs: ['cli', 'bench'], message: `sim must not import cli/ or bench/: ${DRIVERS}.` }],
  },
  {
    dir: 'cloud',
    forbid: [
      {
        dirs: only(['core', 'protocol', 'cloud']),
        message:
          'cloud may import only core and protocol: providers are edges the controller and sim consume; ' +
          'declare what a provider needs from elsewhere as an interface here or in core/ or protocol/.',
      },
    ],
  },
  {
    dir: 'storage',
    forbid: [
      {
        // cloud: the AWS client configuration (endpoints, credentials) is shared by the S3 and EC2 clients.
        dirs: only(['core', 'protocol', 'cloud', 'storage']),
        message: 'storage may import only core, protocol and cloud (AWS client configuration).',
      },
    ],
  },
  {
    dir: 'worker',
    forbid: [
      {
        dirs: only(['core', 'protocol', 'storage', 'worker']),
        message:
          'worker may import only core, protocol and storage: what it shares with the controller belongs in protocol/.',
      },
    ],
  },
  {
    dir: 'protocol',
    forbid: [
      {
        dirs: only(['core', 'protocol']),
        message: 'protocol may import only core: it is the contract the controller and the workers share.',
      },
    ],
  },
  {
    // The chart kit (ECharts pages, escaping, palette) of the controller's reports, the simulator's and the
    // benchmarks': a leaf all three use, so it must lead back to none of them.
    dir: 'report',
    forbid: [
      {
        dirs: only(['core', 'report']),
        message:
          'report may import only core: it draws what the controller, the simulator and the benchmarks hand it.',
      },
    ],
  },
  {
    // Benchmarks drive the simulator and the controller; the CLI drives them, and hands `bench arms` simulate's
    // parser. The controller benchmark runs a real `fleetwise controller` process, whose state directory's file names
    // cli/local-state.ts keeps (a module that loads nothing else).
    dir: 'bench',
    forbid: [
      {
        dirs: ['cli'],
        except: ['cli/local-state'],
        message: `bench must not import cli/ but the state directory's file names (cli/local-state.ts): ${DRIVERS}.`,
      },
    ],
  },
];

/** Node modules that do I/O or reach what does (any subpath: fs/promises), with or without the node: scheme. */
const NODE_IO = [
  'fs',
  'child_process',
  'net',
  'http',
  'https',
  'http2',
  'tls',
  'dns',
  'dgram',
  'cluster',
  'worker_threads',
  'os',
  'process',
  'readline',
  'inspector',
  'tty',
  'repl',
  'console',
  'sqlite',
  'wasi',
  'test', // its runner spawns the test files as processes
  'quic',
  'trace_events',
  // createRequire loads any module, dodging this list; vm runs code in this context (process included); v8 writes
  // heap snapshots.
  'module',
  'vm',
  'v8',
  // Node's internal HTTP and TLS modules, still importable by name.
  '_http_\\w+',
  '_tls_\\w+',
].join('|');
/** Packages that do I/O (a name, or a family: pino-pretty, pg-native); glpk.js is a pure solver and allowed. */
const IO_PACKAGES = [
  'better-sqlite3',
  'pg(?:-[\\w.-]+)?',
  'libpq',
  'dockerode',
  'fastify',
  'pino(?:-[\\w.-]+)?',
  'sonic-boom',
  'thread-stream',
  'prom-client',
  'tar-stream',
  'commander',
  'cli-progress',
  'playwright(?:-[\\w.-]+)?',
  'concurrently',
  'undici',
].join('|');
const IO_SCOPES = 'aws-sdk|aws|smithy|fastify|pinojs|playwright';

/** What a pure layer may not import by name, as a regex on the specifier and the message. */
function pureRestrictions(dir) {
  const io =
    `${dir} is pure (the controller and the simulator both run it): no Node I/O or I/O packages; ` +
    'take the data, or an interface the runtime implements, as a parameter.';
  return [
    { regex: new RegExp(`^(?:node:)?(?:${NODE_IO})(?:/.*)?$`), message: io },
    { regex: new RegExp(`^(?:${IO_PACKAGES})(?:/.*)?$`), message: io },
    { regex: new RegExp(`^@(?:${IO_SCOPES})/`), message: io },
    {
      // Not used by any pure layer today; randomness there must be reproducible from a seed.
      regex: /^(?:node:)?crypto(?:\/.*)?$/,
      message: `${dir} is pure: no node:crypto; use the seeded Rng of core/random.ts.`,
    },
  ];
}

/** The rule that rules a file below src/ (its path from src/, `/`-separated), or undefined (cli/, no rule). */
function ruleOf(fromSrc) {
  return LAYER_RULES.filter((rule) => fromSrc.startsWith(`${rule.dir}/`)).sort(
    (a, b) => b.dir.length - a.dir.length,
  )[0];
}

/**
 * What a specifier names, from `file`: `{ path }` (the file it resolves to, from src/, `/`-separated; `..` first when
 * outside src/), `{ bare }` (a package or a Node module) or `{ refused }` (why it cannot be checked).
 */
function resolveSpecifier(specifier, file) {
  const scheme = /^([a-z][a-z\d+.-]*):/i.exec(specifier)?.[1]?.toLowerCase();
  // Node's relative specifiers: `.`, `..`, and those starting `./`, `../` or `/`.
  const isRelative = /^\.{1,2}(?:\/|$)|^\//.test(specifier);
  if (scheme === undefined && !isRelative) {
    // A package's subpath is resolved against its directory: `pkg/../../src/sim/x.js` leaves it.
    return /%|\/\/|(?:^|\/)\.{1,2}(?:\/|$)/.test(specifier)
      ? { refused: 'a package specifier must name a file inside its package (no ".", "..", "//" or "%")' }
      : { bare: specifier };
  }
  if (scheme === 'node') return { bare: specifier };
  if (scheme !== undefined && scheme !== 'file') return { refused: `${scheme}: URLs cannot be checked` };
  let path;
  try {
    path = fileURLToPath(new URL(specifier, pathToFileURL(file)));
  } catch {
    return { refused: 'it resolves to no file path' };
  }
  return { path: relative(SRC, path).split(sep).join('/') };
}

/** Where a rule's `except` is compared: the path without its extension. */
const withoutExtension = (path) => path.replace(/\.[cm]?[jt]sx?$/, '');

/** The messages a module named `specifier` earns in a file of `rule` (none when it may import it). */
function violations(specifier, file, rule) {
  const target = resolveSpecifier(specifier, file);
  if ('refused' in target) return [`'${specifier}': ${target.refused}.`];
  if ('bare' in target)
    return rule.pure === true
      ? pureRestrictions(rule.dir)
          .filter((r) => r.regex.test(specifier))
          .slice(0, 1)
          .map((r) => `'${specifier}': ${r.message}`)
      : [];
  const [top, ...rest] = target.path.split('/');
  // `../sim` names the directory itself; a file directly in src/ is in no layer.
  if (top === '..' || top === '' || (rest.length === 0 && !SRC_DIRS.includes(top)))
    return [
      `'${specifier}' resolves to ${target.path}, in no directory of src/: import from the layers only.`,
    ];
  return rule.forbid
    .filter((f) => f.dirs.includes(top) && !(f.except ?? []).includes(withoutExtension(target.path)))
    .slice(0, 1)
    .map((f) => `'${specifier}' is src/${target.path}: ${f.message}`);
}

/** The string a module reference names, if it is a constant (a literal, or a template without substitutions). */
function constantString(node) {
  if (node?.type === 'Literal' && typeof node.value === 'string') return node.value;
  if (node?.type === 'TemplateLiteral' && node.expressions.length === 0) return node.quasis[0]?.value.cooked;
  return undefined;
}

/** @type {import('eslint').Rule.RuleModule} */
const layersRule = {
  meta: {
    type: 'problem',
    docs: { description: "ARCHITECTURE.md's layering, on the files imports resolve to" },
    schema: [],
  },
  create(context) {
    const fromSrc = relative(SRC, context.filename).split(sep).join('/');
    const rule = ruleOf(fromSrc);
    if (rule === undefined) return {};
    const check = (source) => {
      if (source === null || source === undefined) return;
      const specifier = constantString(source);
      if (specifier === undefined) {
        context.report({
          node: source,
          message: 'a module must be named by a constant string, so that its layer can be checked.',
        });
        return;
      }
      for (const message of violations(specifier, context.filename, rule))
        context.report({ node: source, message });
    };
    return {
      ImportDeclaration: (node) => check(node.source),
      ExportAllDeclaration: (node) => check(node.source),
      ExportNamedDeclaration: (node) => check(node.source),
      ImportExpression: (node) => check(node.source),
      TSImportType: (node) => check(node.source ?? node.argument?.literal),
      TSExternalModuleReference: (node) => check(node.expression),
    };
  },
};

/**
 * The globals a pure layer must not touch: process and the network need no import, the console writes, and eval,
 * Function and the global object reach any of them by name.
 */
const PURE_FORBIDDEN_GLOBALS = [
  // Unseeded randomness, as node:crypto (below): a pure layer draws from core/random.ts's seeded Rng.
  'crypto',
  'process',
  'fetch',
  'WebSocket',
  'EventSource',
  'console',
  'global',
  'globalThis',
  'eval',
  'Function',
];

function pureGlobalsBlocks() {
  return PURE.map((dir) => ({
    name: `fleetwise/layers/${dir}/globals`,
    files: [`src/${dir}/**`],
    rules: {
      'no-restricted-globals': [
        'error',
        ...PURE_FORBIDDEN_GLOBALS.map((name) => ({
          name,
          message: pureRestrictions(dir).at(name === 'crypto' ? -1 : 0).message,
        })),
      ],
    },
  }));
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    name: 'fleetwise/layers',
    files: ['src/**'],
    plugins: { fleetwise: { rules: { layers: layersRule } } },
    rules: { 'fleetwise/layers': 'error' },
  },
  ...pureGlobalsBlocks(),
);
