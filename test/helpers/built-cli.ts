import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';

/** The compiled CLI that subprocess tests run, as users do (`node dist/cli/main.js …`). */
export const CLI = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');

/** Source modules reachable from `entries` (paths under src/) by relative imports, static or dynamic. */
export function cliSourceModules(entries: readonly string[] = ['cli/main.ts']): string[] {
  const src = join(PROJECT_ROOT, 'src');
  const seen = new Set<string>();
  const visit = (path: string): void => {
    if (seen.has(path) || !existsSync(path)) return;
    seen.add(path);
    for (const m of readFileSync(path, 'utf8').matchAll(/(?:from |import\()'(\.\.?\/[^']+)\.js'/g))
      visit(join(dirname(path), `${m[1] ?? ''}.ts`));
  };
  for (const e of entries) visit(join(src, e));
  return [...seen];
}

/** Modules reachable from `entries` whose dist/ copy is missing or older than the source. */
export function staleCliModules(entries?: readonly string[]): string[] {
  const src = join(PROJECT_ROOT, 'src');
  return cliSourceModules(entries).filter((path) => {
    const built = join(PROJECT_ROOT, 'dist', relative(src, path)).replace(/\.ts$/, '.js');
    return !existsSync(built) || statSync(built).mtimeMs < statSync(path).mtimeMs;
  });
}

/** Held while one test process rebuilds dist/; older than this, it was left by a process that died. */
const BUILD_LOCK = join(PROJECT_ROOT, '.dist-build.lock');
const BUILD_LOCK_STALE_MS = 5 * 60_000;

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Run `build` holding the lock (a directory: mkdir is atomic), waiting for another holder first. */
function withBuildLock(build: () => void): void {
  for (;;) {
    try {
      mkdirSync(BUILD_LOCK);
      break;
    } catch {
      try {
        if (Date.now() - statSync(BUILD_LOCK).mtimeMs > BUILD_LOCK_STALE_MS)
          rmSync(BUILD_LOCK, { recursive: true });
      } catch {
        // released meanwhile
      }
      sleepSync(200);
    }
  }
  try {
    build();
  } finally {
    rmSync(BUILD_LOCK, { recursive: true, force: true });
  }
}

/**
 * `npm test` builds dist/ first; a test file run alone builds once when what the CLI loads is stale. tsc emits even
 * when an unrelated module has a type error, which is enough for the paths these tests use. Test files run two at a
 * time, so the rebuild holds a lock and looks again once it has it: a second rebuild would rewrite dist/ under a
 * controller the first file has just started from it.
 */
export function ensureBuiltCli(entries?: readonly string[]): void {
  if (staleCliModules(entries).length === 0) return;
  withBuildLock(() => {
    if (staleCliModules(entries).length === 0) return;
    spawnSync(
      process.execPath,
      [join(PROJECT_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
      { cwd: PROJECT_ROOT, stdio: 'ignore' },
    );
  });
}

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Run the built CLI in a subprocess (from the project root unless `cwd` is given, with `input` on its standard
 * input); never rejects (a failure is its exit code).
 */
export function runCli(
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  options: { readonly cwd?: string; readonly input?: string } = {},
): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [CLI, ...args],
      { cwd: options.cwd ?? PROJECT_ROOT, env, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
    child.stdin?.end(options.input ?? '');
  });
}
