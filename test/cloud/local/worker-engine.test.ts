import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { LocalInstance } from '../../../src/cloud/local/local-provider.js';
import {
  ProcessWorkerSpawner,
  WORKER_ENGINE_FILE,
  type WorkerEngine,
} from '../../../src/cloud/local/worker-spawner.js';
import { ProcessExecutor } from '../../../src/worker/executors/process.js';
import { killProcessGroups } from '../../helpers/processes-under.js';
import { UNREACHABLE_URL } from '../../helpers/unreachable-url.js';

/**
 * A local worker's engine is recorded in its instance's directory when it is spawned, and a termination stops the
 * instance's tasks where that record says; a record that cannot be read is a failure to stop them, said and reported
 * (naming the file and field), never a silent fall-back to another engine.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fw-worker-engine-'));
const FAKE_WORKER = join(scratch, 'fake-worker.mjs');
writeFileSync(FAKE_WORKER, 'setInterval(() => {}, 1000);\n');
const spawned: number[] = [];
afterAll(() => {
  killProcessGroups(spawned);
  rmSync(scratch, { recursive: true, force: true });
});

let n = 0;
function instance(): LocalInstance {
  n += 1;
  // Unique on this host: a stop looks a worker without a recorded pid up by its instance id.
  const instanceId = `local-engine-${process.pid}-${n}`;
  const dir = join(scratch, instanceId);
  mkdirSync(dir);
  return {
    instanceId,
    typeName: 'c7i.large',
    state: 'running',
    tags: {},
    launchTimeMs: 0,
    dir,
  };
}

function spawner(
  executorKind: 'docker' | 'process',
  seen: (WorkerEngine | undefined)[] = [],
  warned: string[] = [],
): ProcessWorkerSpawner {
  return new ProcessWorkerSpawner({
    controllerUrl: UNREACHABLE_URL,
    launchSecretKey: 'unused-key',
    executorKind,
    executorFor: (dir, _id, engine) => {
      seen.push(engine);
      return new ProcessExecutor({ stateDir: join(dir, 'executor') });
    },
    main: FAKE_WORKER,
    warn: (m) => warned.push(m),
  });
}

async function withDockerHost<T>(host: string | undefined, body: () => T): Promise<T> {
  const saved = process.env.DOCKER_HOST;
  if (host === undefined) delete process.env.DOCKER_HOST;
  else process.env.DOCKER_HOST = host;
  try {
    return await body();
  } finally {
    if (saved === undefined) delete process.env.DOCKER_HOST;
    else process.env.DOCKER_HOST = saved;
  }
}

/** A task the instance's worker recorded (tasks/<id>/agent.json), as the agent records each it runs. */
function recordTask(inst: LocalInstance, taskId: string): void {
  mkdirSync(join(inst.dir, 'tasks', taskId), { recursive: true });
  writeFileSync(join(inst.dir, 'tasks', taskId, 'agent.json'), '{}');
}

const recorded = (inst: LocalInstance): unknown =>
  JSON.parse(readFileSync(join(inst.dir, WORKER_ENGINE_FILE), 'utf8'));

describe("a local worker's engine", () => {
  it("is recorded at spawn, the worker's DOCKER_HOST with it, and handed to the executor that stops its tasks", async () => {
    const seen: (WorkerEngine | undefined)[] = [];
    const docker = spawner('docker', seen);
    const withHost = instance();
    const withoutHost = instance();
    spawned.push(
      await withDockerHost('unix:///run/worker-engine.sock', () => docker.spawn(withHost) as number),
      await withDockerHost(undefined, () => docker.spawn(withoutHost) as number),
    );
    const processKind = instance();
    spawned.push(
      await withDockerHost('unix:///run/ignored.sock', () => spawner('process').spawn(processKind) as number),
    );
    expect(recorded(withHost)).toEqual({ executor: 'docker', dockerHost: 'unix:///run/worker-engine.sock' });
    // None: the worker used the engine's default socket, not whatever a later reader's environment names.
    expect(recorded(withoutHost)).toEqual({ executor: 'docker' });
    expect(recorded(processKind)).toEqual({ executor: 'process' });

    // Stopped from an environment with another DOCKER_HOST: the executor is given the recorded engine.
    const unrecorded = instance();
    for (const inst of [withHost, unrecorded]) recordTask(inst, 'job-1.0');
    await withDockerHost('unix:///elsewhere.sock', async () => {
      expect(await docker.stop(withHost)).toEqual({ tasksStopped: true });
      expect(await docker.stop(unrecorded)).toEqual({ tasksStopped: true });
    });
    expect(seen).toEqual([{ executor: 'docker', dockerHost: 'unix:///run/worker-engine.sock' }, undefined]);
  });

  it('a record that cannot be read fails the stop, naming the file, the field and the tasks that may still run', async () => {
    const warned: string[] = [];
    const seen: (WorkerEngine | undefined)[] = [];
    const inst = instance();
    writeFileSync(join(inst.dir, WORKER_ENGINE_FILE), JSON.stringify({ executor: 'docker', dockerHost: 7 }));
    for (const task of ['job-2.0', 'job-1.0']) recordTask(inst, task);
    const outcome = await spawner('docker', seen, warned).stop(inst);
    expect(outcome).toMatchObject({ tasksStopped: false, tasks: ['job-1.0', 'job-2.0'] });
    expect(outcome.tasksStopped === false && outcome.reason).toMatch(
      new RegExp(`^${join(inst.dir, WORKER_ENGINE_FILE)}: dockerHost: `),
    );
    // No executor was built from a guess: the tasks are not looked for at an engine they may not be on.
    expect(seen).toEqual([]);
    expect(warned).toEqual([
      expect.stringMatching(new RegExp(`^could not stop the tasks of local instance ${inst.instanceId}: `)),
    ]);
  });

  it('stops an instance whose worker recorded no task without asking any engine (an older worker, nothing recorded)', async () => {
    const inst = instance();
    const stopper = new ProcessWorkerSpawner({
      controllerUrl: UNREACHABLE_URL,
      launchSecretKey: 'unused-key',
      executorKind: 'docker',
      executorFor: () => {
        throw new Error('connect ENOENT /var/run/docker.sock');
      },
      main: FAKE_WORKER,
    });
    expect(await stopper.stop(inst)).toEqual({ tasksStopped: true });
  });
});
