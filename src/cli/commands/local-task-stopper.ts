import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { InstanceTaskStopper, WorkerEngine } from '../../cloud/local/worker-spawner.js';
import { DockerExecutor } from '../../worker/executors/docker.js';
import { dockerFromEnv } from '../../worker/executors/docker-engine.js';
import { makeExecutor } from './worker.js';

/** How a local instance's leftover tasks are reached, by `fleetwise down` and by a controller terminating it. */

/**
 * The executor that stops an instance's tasks where its worker ran them: with the engine recorded at the worker's spawn
 * (its DOCKER_HOST, not this process's). A worker spawned before engines were recorded falls back to this process's
 * environment.
 */
export function taskStopperFor(
  dir: string,
  instanceId: string,
  engine: WorkerEngine | undefined,
): InstanceTaskStopper {
  if (executorOf(dir, engine) === 'process') return makeExecutor('process', dir, instanceId);
  if (engine === undefined) return makeExecutor('docker', dir, instanceId);
  // Built images stay: the engine is shared by every local instance's worker.
  return new DockerExecutor({
    instanceId,
    docker: dockerFromEnv({ DOCKER_HOST: engine.dockerHost }),
    evictBuiltImages: false,
  });
}

/**
 * The executor an instance's worker used: as recorded, or, for a worker spawned before that, as its directory shows:
 * the process executor keeps its records under executor/; otherwise its tasks were containers.
 */
export function executorOf(dir: string, engine: WorkerEngine | undefined): WorkerEngine['executor'] {
  return engine?.executor ?? (existsSync(join(dir, 'executor')) ? 'process' : 'docker');
}
