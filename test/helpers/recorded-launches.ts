import { join } from 'node:path';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { LocalProvider, type WorkerSpawner } from '../../src/cloud/local/local-provider.js';
import type { StateStore } from '../../src/controller/state-store.js';
import { WorkerRegistrar } from '../../src/controller/worker-identity/worker-registrar.js';

/**
 * Local instances recorded by the real local provider without any worker process (the registrar only reads the
 * provider's records), and a registrar over them: the rig of the registration tests.
 */

const recordsOnly: WorkerSpawner = { spawn: () => undefined, kill: () => Promise.resolve() };

export interface RecordedLaunches {
  readonly provider: LocalProvider;
  readonly cloudIds: readonly string[];
  /** Each instance's launch token (`launch-token-<n>`), from which its launch secret derives. */
  readonly tokens: readonly string[];
}

/** `count` c7i.large instances of `cluster`, recorded under `scratch`. */
export async function recordLaunches(
  scratch: string,
  cluster: string,
  count: number,
): Promise<RecordedLaunches> {
  const provider = new LocalProvider({
    stateFile: join(scratch, 'local-instances.json'),
    instancesDir: join(scratch, 'instances'),
    catalog: loadCatalogFile(),
    spawner: recordsOnly,
  });
  const cloudIds: string[] = [];
  const tokens: string[] = [];
  for (let n = 1; n <= count; n += 1) {
    const token = `launch-token-${n}`;
    const result = await provider.launch({
      typeName: 'c7i.large',
      idempotencyToken: token,
      clusterName: cluster,
      planId: 'round-1',
      instanceKey: `inst-${n}`,
    });
    cloudIds.push(result.instanceIds[0] as string);
    tokens.push(token);
  }
  return { provider, cloudIds, tokens };
}

/** The state's running records of the launches (in order), and a launch-secret registrar over them. */
export function registrarOver(
  launches: RecordedLaunches,
  store: StateStore,
  cluster: string,
  clusterKey: string,
): { registrar: WorkerRegistrar; recordIds: string[] } {
  const recordIds = launches.cloudIds.map((cloudId, i) => {
    const inst = store.createInstance({ typeName: 'c7i.large', launchToken: launches.tokens[i] as string });
    store.setInstanceState(inst.id, 'launching', { cloudId });
    return store.setInstanceState(inst.id, 'running').id;
  });
  const registrar = new WorkerRegistrar({
    store,
    clusterName: cluster,
    clusterKey,
    describeInstance: async (cloudId) =>
      (await launches.provider.list(cluster, { includeTerminated: true })).find(
        (i) => i.instanceId === cloudId,
      ),
    launchCredential: { kind: 'launch-secret' },
  });
  return { registrar, recordIds };
}
