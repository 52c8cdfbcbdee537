import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { ValidationError } from '../core/validation.js';
import { settleInLanes, type Settled } from '../sim/run-pool.js';
import { stopProcesses } from './stop-processes.js';
import { COMPARED_METRICS, type ArmFigures, type ComparedMetric } from './paired-arms.js';

/**
 * Runs of another fleetwise build: `node DIR/dist/cli/main.js simulate … --json` in a subprocess, so that `bench arms`
 * can compare a change with the build before it (a second checkout or worktree, built) on the same seeds. The other
 * build parses the flags itself, so an arm may use a flag this build no longer has, or lack one it added.
 */

/** The CLI of the build in `dir`, which must have been built (`npm run build`). */
export function buildCli(dir: string, source: string): string {
  const cli = join(resolve(dir), 'dist', 'cli', 'main.js');
  if (!existsSync(cli))
    throw new ValidationError(source, [`${cli} does not exist: build that checkout first (npm run build)`]);
  return cli;
}

export interface BuildRun {
  /** The other build's `dist/cli/main.js`. */
  readonly cli: string;
  /** The simulate flags, `--json` and the seed included. */
  readonly args: readonly string[];
  /** Names the run in a failure and in the progress (`seed 5 before`). */
  readonly label: string;
}

/** The figures `bench arms` compares, as numbers or null; the record's other fields are kept as they are. */
const comparedFigures = z
  .object(
    Object.fromEntries(COMPARED_METRICS.map((m) => [m, z.number().nullable().optional()])) as Record<
      ComparedMetric,
      z.ZodOptional<z.ZodNullable<z.ZodNumber>>
    >,
  )
  .passthrough();

/** A `simulate --json` answer: `{ runs: [record] }`. */
const simulateJson = z.object({ runs: z.array(comparedFigures) });

/**
 * The one run's record from a build's stdout, named by `label` as this build's runs are (`seed 5 before`); names the
 * run and what was wrong.
 */
export function parseBuildOutput(stdout: string, label: string): ArmFigures {
  let parsed: unknown;
  try {
    parsed = JSON.parse(stdout);
  } catch {
    throw new Error(`${label}: the build printed no JSON (${stdout.slice(0, 200).trim() || 'nothing'})`);
  }
  const answer = simulateJson.safeParse(parsed);
  if (!answer.success)
    throw new Error(
      `${label}: the build's JSON is not a simulate answer: ${answer.error.issues
        .map((i) => `${i.path.join('.')}: ${i.message}`)
        .join('; ')}`,
    );
  const [record, ...more] = answer.data.runs;
  if (record === undefined || more.length > 0)
    throw new Error(
      `${label}: asks for ${answer.data.runs.length} runs; an arm is one scheduler at one value of time`,
    );
  return { ...record, scheduler: label };
}

/** Every build run's subprocess still running, of any `runBuilds` call (what `stopBuildRuns` stops). */
const liveChildren = new Set<ChildProcess>();
/** Set by `stopBuildRuns`: a run that ends now was stopped, and fails nothing (the stop decides how the bench exits). */
let stopping = false;
/** How long a run may take to exit on SIGTERM before it is killed. */
const STOP_GRACE_MS = 10_000;

/**
 * Stop every build run still running and resolve once all have exited (SIGTERM, SIGKILL after `STOP_GRACE_MS`): a
 * `bench arms` stopped by a signal that reaches it alone (`timeout`, `kill`) would otherwise leave them computing.
 * From then on no run settles, so a stopped run cannot fail the bench with an error of its own.
 */
export function stopBuildRuns(): Promise<void> {
  stopping = true;
  return stopProcesses(liveChildren, STOP_GRACE_MS);
}

/**
 * SIGKILL every build run still running, synchronously, for a process 'exit' listener: the last resort of a `bench
 * arms` that exits without having stopped them (an uncaught error), whose subprocesses would otherwise run on.
 */
export function killBuildRunsNow(): void {
  for (const child of liveChildren)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

/** How much of a failed run's stderr its error quotes (the end, where the reason is). */
const STDERR_TAIL = 2000;

function runOne(run: BuildRun): Promise<ArmFigures> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [run.cli, 'simulate', ...run.args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    liveChildren.add(child);
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => {
      err = (err + chunk.toString('utf8')).slice(-STDERR_TAIL);
    });
    child.on('error', (e) => {
      liveChildren.delete(child);
      if (stopping) return;
      fail(new Error(`${run.label}: ${e.message}`));
    });
    child.on('close', (code, signal) => {
      liveChildren.delete(child);
      if (stopping) return;
      if (code !== 0) {
        fail(new Error(`${run.label}: exited ${signal ?? `with ${code}`}: ${err.trim()}`));
        return;
      }
      try {
        done(parseBuildOutput(Buffer.concat(out).toString('utf8'), run.label));
      } catch (e) {
        fail(e instanceof Error ? e : new Error(String(e)));
      }
    });
  });
}

/**
 * Run each in its own subprocess, at most `parallel` at once, each whatever the others do (one build's failure on one
 * seed loses no other run): every run's figures or failure, in the runs' order; `onSettled` hears each as it ends.
 */
export function runBuilds(
  runs: readonly BuildRun[],
  parallel: number,
  onSettled: (index: number, outcome: Settled<ArmFigures>) => void = () => undefined,
): Promise<Settled<ArmFigures>[]> {
  return settleInLanes(runs.length, parallel, async (index) => {
    let figures: ArmFigures;
    try {
      figures = await runOne(runs[index] as BuildRun);
    } catch (e) {
      const error = e instanceof Error ? e : new Error(String(e));
      onSettled(index, { ok: false, error });
      throw error;
    }
    onSettled(index, { ok: true, value: figures });
    return figures;
  });
}
