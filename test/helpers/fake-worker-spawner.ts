import { join } from 'node:path';
import { ProcessWorkerSpawner } from '../../src/cloud/local/worker-spawner.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { UNREACHABLE_URL } from './unreachable-url.js';

/**
 * The local provider's real spawner starting `main` (a stand-in worker script) for each instance, its tasks on the
 * process executor in the instance's directory; no controller answers at its URL.
 */
export function fakeProcessWorkerSpawner(main: string): ProcessWorkerSpawner {
  return new ProcessWorkerSpawner({
    controllerUrl: UNREACHABLE_URL,
    launchSecretKey: 'unused-key',
    executorKind: 'process',
    executorFor: (dir) => new ProcessExecutor({ stateDir: join(dir, 'executor') }),
    main,
  });
}
