import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import { BUNDLED_CATALOG_PATH, loadCatalogFile } from '../../cloud/catalog-file.js';
import { LocalProvider } from '../../cloud/local/local-provider.js';
import { journalPathOf } from '../../cloud/local/instance-file.js';
import { stopWorkersGently } from '../../cloud/local/local-shutdown.js';
import { ProcessWorkerSpawner } from '../../cloud/local/worker-spawner.js';
import { parseWith } from '../../core/validation.js';
import { findLocalController, LOCAL_STATE_DIR } from '../local-state.js';
import { lockHolder, processRunning } from '../state-dir-lock.js';
import { makeExecutor } from './worker.js';

/**
 * `fleetwise down`: stop everything a local controller started from its state directory: the controller (which stops
 * its workers, unless it was started with --keep-workers), then every worker process the local instance records still
 * list, each checkpointing and stopping its tasks first; what does not stop in time is killed with its tasks.
 * Idempotent: with nothing running it says so and succeeds.
 */

interface DownFlags {
  readonly stateDir?: string;
  readonly graceSeconds?: string;
}

const flagsSchema = z.object({
  '--state-dir': z.string().min(1, 'a directory').optional(),
  '--grace-seconds': z.coerce.number({ error: 'a number of seconds' }).positive('must be > 0').default(90),
});

/** The controller's pid if one runs on this state directory (not a stale pid file, not a recycled pid). */
function runningController(stateDir: string): number | undefined {
  const pid = lockHolder(stateDir);
  if (pid === undefined) return undefined;
  try {
    if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('controller')) return undefined;
  } catch {
    // no /proc: trust the pid file
  }
  return pid;
}

async function waitForExit(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (processRunning(pid)) {
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
  return true;
}

export async function runDown(flags: DownFlags): Promise<void> {
  const options = parseWith(
    flagsSchema,
    { '--state-dir': flags.stateDir, '--grace-seconds': flags.graceSeconds },
    'fleetwise down',
  );
  // Without --state-dir, the local controller the client commands find: ./.fleetwise here or in a directory above.
  const stateDir = resolve(options['--state-dir'] ?? findLocalController()?.stateDir ?? LOCAL_STATE_DIR);
  const graceMs = options['--grace-seconds'] * 1000;
  const out = (line: string): boolean => process.stdout.write(`${line}\n`);
  let stoppedAnything = false;

  const controller = runningController(stateDir);
  if (controller !== undefined) {
    out(`stopping the controller (pid ${controller}); it checkpoints and stops its workers' tasks`);
    process.kill(controller, 'SIGTERM');
    if (!(await waitForExit(controller, graceMs + 30_000))) {
      process.kill(controller, 'SIGKILL');
      out(`the controller (pid ${controller}) did not stop in time: killed`);
    } else out(`controller stopped`);
    stoppedAnything = true;
  }

  const stateFile = join(stateDir, 'local-instances.json');
  // The records are a snapshot and its journal; either may exist alone.
  if (existsSync(stateFile) || existsSync(journalPathOf(stateFile))) {
    const provider = new LocalProvider({
      stateFile,
      instancesDir: join(stateDir, 'instances'),
      catalog: loadCatalogFile(BUNDLED_CATALOG_PATH),
      spawner: new ProcessWorkerSpawner({
        controllerUrl: '',
        launchSecretKey: '',
        executorKind: 'process',
        // Which executor an instance's worker used shows in its directory: the process executor keeps its records
        // under executor/; otherwise its tasks were containers.
        executorFor: (dir, instanceId) =>
          existsSync(join(dir, 'executor'))
            ? makeExecutor('process', dir, instanceId)
            : makeExecutor('docker', dir, instanceId),
      }),
    });
    const running = provider.instances().filter((i) => i.state === 'running');
    if (running.length > 0) {
      const outcomes = await stopWorkersGently(running, { graceMs });
      await provider.terminate(running.map((i) => i.instanceId));
      for (const o of outcomes)
        out(
          `worker ${o.instanceId} (pid ${o.pid ?? '?'}): ` +
            (o.outcome === 'exited'
              ? 'checkpointed its tasks and stopped'
              : o.outcome === 'gone'
                ? 'had already exited; its leftover tasks (if any) are stopped'
                : 'did not stop in time: killed with its tasks'),
        );
      stoppedAnything = true;
    }
  }
  if (!stoppedAnything) out(`nothing to stop in ${stateDir}`);
}

export function registerDown(program: Command): void {
  program
    .command('down')
    .description(
      'stop everything a local controller started: the controller and every worker process its state lists',
    )
    .option(
      '--state-dir <dir>',
      'the local controller state directory (default: .fleetwise here or in a directory above, as the client commands find it)',
    )
    .option(
      '--grace-seconds <s>',
      'how long workers may take to checkpoint their tasks before they are killed (default 90)',
    )
    .action(async (options: DownFlags) => {
      await runDown(options);
    });
}
