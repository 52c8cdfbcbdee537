// Flat config: typescript-eslint's recommended rules, with `any` forbidden (the brief: no `any` escapes), and the
// layering of ARCHITECTURE.md ("Dependencies point inward") as lint errors.
import { readdirSync } from 'node:fs';
import tseslint from 'typescript-eslint';

/*
 * Layering. Each rule below names a directory of src/ and the top-level directories of src/ it must not import, with
 * the message a violation prints. It is enforced with eslint's built-in no-restricted-imports (static imports and
 * `export … from`, type-only ones included: a type import is a dependency too) and no-restricted-syntax (dynamic
 * `import()`, which no-restricted-imports does not see).
 *
 * Import specifiers are matched textually, so the patterns depend on where the importing file sits: from
 * src/controller/x.ts the simulator is `../sim/…`, from src/controller/api/x.ts it is `../../sim/…`. One config block
 * per depth of the importing file matches exactly the number of `../` that leaves src/<dir>/ and lands in src/, so a
 * subdirectory that happens to share a layer's name (src/world/cloud/) is never mistaken for that layer.
 */

/** The pure layers, inward first: each may import itself and the layers before it, and no Node I/O. */
const PURE = ['core', 'scheduler', 'queue', 'round', 'world', 'predict'];
const EDGES = ['sim', 'controller', 'cloud', 'storage', 'worker', 'protocol', 'cli', 'bench'];
/**
 * Every top-level directory of src/: the layers named here (some not created yet) and whatever exists, so that an
 * allow-list ("core imports only core") also covers a directory added later.
 */
const SRC_DIRS = [
  ...new Set([
    ...PURE,
    ...EDGES,
    ...readdirSync(new URL('./src/', import.meta.url), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name),
  ]),
];
/** Deepest file below src/<dir>/ the patterns cover (src/<dir>/a/b/…/x.ts with MAX_DEPTH path segments). */
const MAX_DEPTH = 8;

const only = (allowed) => SRC_DIRS.filter((dir) => !allowed.includes(dir));
const INWARD = 'dependencies point inward: core ← scheduler ← queue ← round ← world ← predict';

/** @type {{ dir: string, forbid: { dirs: string[], message: string }[], pure?: boolean }[]} */
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
      {
        dirs: ['cli', 'bench'],
        message: 'controller must not import cli/ or bench/: they drive it, not the reverse.',
      },
    ],
  },
  {
    dir: 'sim',
    forbid: [
      {
        // ARCHITECTURE.md: "nor the reverse, except the simulated edges it provides": only sim/controller-runtime/
        // (virtual clock, simulated cloud and workers driving the real controller) may; see the block below.
        dirs: ['controller'],
        message:
          'sim must not import the controller (only sim/controller-runtime/, which drives it): put shared code in ' +
          'round/, world/ or predict/.',
      },
      {
        dirs: ['cli', 'bench'],
        message: 'sim must not import cli/ or bench/: they drive it, not the reverse.',
      },
    ],
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
];

/** Node modules that do I/O (any subpath: fs/promises, dns/promises), with or without the node: scheme. */
const NODE_IO =
  'fs|child_process|net|http|https|http2|tls|dns|dgram|cluster|worker_threads|os|process|readline|inspector';
/** Packages that do I/O; glpk.js is a pure solver and allowed. */
const IO_PACKAGES =
  'better-sqlite3|pg-native|libpq|dockerode|fastify|pino|prom-client|tar-stream|commander|cli-progress';
const IO_SCOPES = 'aws-sdk|smithy|fastify';

/** Import restrictions of the pure layers beyond their allow-list. */
function pureRestrictions(dir) {
  const io =
    `${dir} is pure (the controller and the simulator both run it): no Node I/O or I/O packages; ` +
    'take the data, or an interface the runtime implements, as a parameter.';
  return [
    { regex: `^(?:node:)?(?:${NODE_IO})(?:/.*)?$`, message: io },
    { regex: `^(?:${IO_PACKAGES})(?:/.*)?$`, message: io },
    { regex: `^@(?:${IO_SCOPES})/`, message: io },
    {
      // Not used by any pure layer today; randomness there must be reproducible from a seed.
      regex: '^(?:node:)?crypto$',
      message: `${dir} is pure: no node:crypto; use the seeded Rng of core/random.ts.`,
    },
  ];
}

/** A relative specifier that, from a file `depth` directories below src/<dir>/, reaches src/<one of dirs>. */
function reaching(dirs, depth) {
  return `^(?:\\./)?(?:\\.\\./){${depth}}(?:${dirs.join('|')})(?:/|$)`;
}

/** esquery's regex literal cannot contain "/": spell it \x2F (the same character to RegExp). */
const forSelector = (regex) => regex.replaceAll('/', '\\x2F');

function layerBlocks() {
  const blocks = [];
  for (const rule of LAYER_RULES)
    for (let depth = 1; depth <= MAX_DEPTH; depth++) {
      const patterns = [
        ...rule.forbid.map((f) => ({ regex: reaching(f.dirs, depth), message: f.message })),
        ...(rule.pure === true ? pureRestrictions(rule.dir) : []),
      ];
      blocks.push({
        name: `fleetwise/layers/${rule.dir}/depth-${depth}`,
        // Files only at this depth; a pattern ending in "*" applies to the files linted, it adds none.
        files: [`src/${rule.dir}/${'*/'.repeat(depth - 1)}*`],
        rules: {
          'no-restricted-imports': ['error', { patterns }],
          'no-restricted-syntax': [
            'error',
            ...patterns.map((p) => ({
              selector: `ImportExpression[source.value=/${forSelector(p.regex)}/]`,
              message: p.message,
            })),
          ],
          ...(rule.pure === true
            ? {
                // The globals behind node:process and the network: importing them is not needed to use them.
                'no-restricted-globals': [
                  'error',
                  ...['process', 'fetch'].map((name) => ({
                    name,
                    message: pureRestrictions(rule.dir)[0].message,
                  })),
                ],
              }
            : {}),
        },
      });
    }
  return blocks;
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
  ...layerBlocks(),
  controllerRuntimeBlock(),
);

/** sim/controller-runtime/ runs the real controller against simulated edges: it may import the controller. */
function controllerRuntimeBlock() {
  const patterns = [
    {
      regex: reaching(['cli', 'bench'], 2),
      message: 'sim must not import cli/ or bench/: they drive it, not the reverse.',
    },
  ];
  return {
    name: 'fleetwise/layers/sim/controller-runtime',
    files: ['src/sim/controller-runtime/*'],
    rules: {
      'no-restricted-imports': ['error', { patterns }],
      'no-restricted-syntax': [
        'error',
        ...patterns.map((p) => ({
          selector: `ImportExpression[source.value=/${forSelector(p.regex)}/]`,
          message: p.message,
        })),
      ],
    },
  };
}
