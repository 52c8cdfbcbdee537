import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { LocalProvider, type WorkerSpawner } from '../../src/cloud/local/local-provider.js';
import { checkStateBeforeStart, LostStateError } from '../../src/controller/empty-state-guard.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import { findPreviousClusterEvidence } from '../../src/controller/previous-cluster-evidence.js';
import { silentLogger } from '../../src/controller/seams.js';
import { CLUSTER_INITIALIZED_KEY, ClusterMismatchError } from '../../src/controller/state/initialization.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { jobSpec, CPU_SMALL } from './controller-fixtures.js';

/**
 * What says an empty state is a lost one (the cluster's instances, the local instance file, the object store's
 * contents), and the check a controller makes before starting: an empty state over such evidence is refused unless
 * `--init`; a new cluster and an ordinary restart start; the state is marked either way.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-evidence-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const recordsOnly: WorkerSpawner = { spawn: () => undefined, kill: () => Promise.resolve() };
let dirs = 0;

function site(): { dir: string; provider: LocalProvider; instanceFile: string; objects: FsObjectStore } {
  dirs += 1;
  const dir = join(scratch, `site-${dirs}`);
  const instanceFile = join(dir, 'local-instances.json');
  const provider = new LocalProvider({
    stateFile: instanceFile,
    instancesDir: join(dir, 'instances'),
    catalog: loadCatalogFile(),
    spawner: recordsOnly,
  });
  return { dir, provider, instanceFile, objects: new FsObjectStore(join(dir, 'objects')) };
}

async function launch(provider: LocalProvider, cluster: string, token: string): Promise<string> {
  const result = await provider.launch({
    typeName: 'c7i.large',
    idempotencyToken: token,
    clusterName: cluster,
    planId: 'round-1',
    instanceKey: token,
  });
  return result.instanceIds[0] as string;
}

describe('previous cluster evidence', () => {
  it('finds nothing for a new cluster, and names what an earlier run left', async () => {
    const { provider, instanceFile, objects } = site();
    const sources = { clusterName: 'c', provider, localInstanceFile: instanceFile, objectStore: objects };
    expect(await findPreviousClusterEvidence(sources)).toEqual([]);

    const running = await launch(provider, 'c', 'token-1');
    const stopped = await launch(provider, 'c', 'token-2');
    await provider.terminate([stopped]);
    await launch(provider, 'another-cluster', 'token-3');
    await objects.put('checkpoints/job-1/job-1.0/0001/manifest.json', Buffer.from('{}'));
    await objects.put('checkpoints/job-1/job-1.0/0002/manifest.json', Buffer.from('{}'));
    await objects.put('logs/job-1/run-1.log', Buffer.from('hello'));
    const found = await findPreviousClusterEvidence(sources);
    expect(found.map((e) => e.source)).toEqual(['cloud', 'local-instance-file', 'object-store']);
    const [cloud, file, store] = found.map((e) => e.description);
    expect(cloud).toMatch(new RegExp(`^1 instance\\(s\\) tagged fleetwise:cluster=c still run: ${running} `));
    expect(file).toContain(`${instanceFile} lists 3 instance(s)`);
    expect(store).toMatch(
      /holds 3 object\(s\).*checkpoints\/job-1\/job-1\.0\/0001\/manifest\.json \(\+1 more\), logs\//,
    );
  });

  it('reads an instance file that is not JSON as evidence, not as nothing', async () => {
    const { dir, instanceFile } = site();
    rmSync(dir, { recursive: true, force: true });
    const file = join(scratch, 'broken-instances.json');
    writeFileSync(file, '{ not json');
    const found = await findPreviousClusterEvidence({ clusterName: 'c', localInstanceFile: file });
    expect(found).toEqual([
      { source: 'local-instance-file', description: `${file} exists but is not valid JSON` },
    ]);
    expect(await findPreviousClusterEvidence({ clusterName: 'c', localInstanceFile: instanceFile })).toEqual(
      [],
    );
  });
});

describe('checking the state before a start', () => {
  const check = (
    store: MemoryStateStore,
    sources: Parameters<typeof findPreviousClusterEvidence>[0],
    init = false,
  ) =>
    checkStateBeforeStart({
      store,
      stateFile: '/srv/state.db',
      init,
      sources,
      nowSeconds: 100,
      log: silentLogger,
    });

  it('starts a new cluster where nothing ran, and a restart where the state has its cluster', async () => {
    const { provider, instanceFile, objects } = site();
    const sources = { clusterName: 'c', provider, localInstanceFile: instanceFile, objectStore: objects };
    const store = new MemoryStateStore();
    expect(await check(store, sources)).toBe('new');
    expect(store.getValue(CLUSTER_INITIALIZED_KEY)).toMatchObject({ clusterName: 'c', how: 'new' });
    // Later the cluster has instances and objects: a restart on the marked state is ordinary, even with no job.
    await launch(provider, 'c', 'token-1');
    await objects.put('reports/latest.json', Buffer.from('{}'));
    expect(await check(store, sources)).toBe('existing');
    // A state from before the mark existed, with jobs: ordinary too, and marked now.
    const older = new MemoryStateStore();
    older.submitJob(jobSpec('small', CPU_SMALL));
    expect(await check(older, sources)).toBe('existing');
    expect(older.getValue(CLUSTER_INITIALIZED_KEY)).toMatchObject({ how: 'existing' });
  });

  it('refuses an empty state over evidence unless --init, saying what it found and what --init does', async () => {
    const { provider, instanceFile, objects } = site();
    const instance = await launch(provider, 'c', 'token-1');
    const sources = { clusterName: 'c', provider, localInstanceFile: instanceFile, objectStore: objects };
    const lost = new MemoryStateStore();
    const refusal = await check(lost, sources).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(LostStateError);
    expect((refusal as LostStateError).evidence.map((e) => e.source)).toEqual([
      'cloud',
      'local-instance-file',
    ]);
    expect((refusal as Error).message).toMatch(/^refusing to start: the state \/srv\/state\.db is empty/);
    expect((refusal as Error).message).toContain(instance);
    expect((refusal as Error).message).toMatch(/--init: the instances found are then kept running/);
    expect(lost.getValue(CLUSTER_INITIALIZED_KEY)).toBeUndefined(); // refused: nothing written
    expect(await check(lost, sources, true)).toBe('init');
    expect(lost.getValue(CLUSTER_INITIALIZED_KEY)).toMatchObject({ how: 'init' });
    expect(await check(lost, sources)).toBe('existing'); // the next start needs no --init
  });

  it('reserves the job ids an earlier run left objects under, so new jobs never land on its keys', async () => {
    const { dir, instanceFile, objects } = site();
    mkdirSync(dir, { recursive: true });
    // What the earlier run left: a job's exit record and logs, a higher one's logs only, the archive of one accepted
    // but never run; another cluster's archive and names no controller gives are not this cluster's ids.
    await objects.put('checkpoints/job-3/job-3.0/exit-1.json', Buffer.from('{}'));
    await objects.put('logs/job-3/00000000000001-job-3.0-local-1.log', Buffer.from('old output'));
    await objects.put('logs/job-12/00000000000002-job-12.0-local-2.log', Buffer.from('old output'));
    await objects.put('jobs/c/job-9/spec.json', Buffer.from('{}'));
    await objects.put('jobs/other/job-50/spec.json', Buffer.from('{}'));
    await objects.put('logs/job-0012x/a.log', Buffer.from('?'));
    const file = join(dir, 'state.db');
    const store = new SqliteStateStore(file);
    const warnings: string[] = [];
    const log = { ...silentLogger, warn: (message: string) => warnings.push(message) };
    const sources = { clusterName: 'c', localInstanceFile: instanceFile, objectStore: objects };
    try {
      expect(
        await checkStateBeforeStart({ store, stateFile: file, init: true, sources, nowSeconds: 1, log }),
      ).toBe('init');
      expect(store.submitJob(jobSpec('small', CPU_SMALL)).id).toBe('job-13');
      expect(warnings).toEqual([
        expect.stringMatching(/jobs up to job-12 \(logs\/job-12\/\).*start at job-13/),
      ]);
    } finally {
      store.close();
    }
    // The archive alone counts too, and a new cluster on an empty store starts at job-1.
    const archived = site();
    await archived.objects.put('jobs/c/job-9/spec.json', Buffer.from('{}'));
    const fresh = new MemoryStateStore();
    await check(fresh, { clusterName: 'c', objectStore: archived.objects }, true);
    expect(fresh.submitJob(jobSpec('small', CPU_SMALL)).id).toBe('job-10');
    const empty = new MemoryStateStore();
    expect(await check(empty, { clusterName: 'c', objectStore: site().objects })).toBe('new');
    expect(empty.submitJob(jobSpec('small', CPU_SMALL)).id).toBe('job-1');
  });

  it('refuses a state marked for another cluster before looking at the cloud, naming both and `cluster`', async () => {
    const { dir, provider, instanceFile, objects } = site();
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'state.db');
    const first = new SqliteStateStore(file);
    const prod = { clusterName: 'prod', provider, localInstanceFile: instanceFile, objectStore: objects };
    expect(
      await checkStateBeforeStart({
        store: first,
        stateFile: file,
        init: false,
        sources: prod,
        nowSeconds: 1,
        log: silentLogger,
      }),
    ).toBe('new');
    first.close();
    // Restarted on the same file with a configuration that names another cluster (or none: the default).
    const again = new SqliteStateStore(file);
    try {
      let listed = 0;
      const counting = Object.assign(Object.create(provider) as LocalProvider, {
        list: (...args: Parameters<LocalProvider['list']>) => {
          listed += 1;
          return provider.list(...args);
        },
      });
      const other = { ...prod, clusterName: 'local', provider: counting };
      for (const init of [false, true]) {
        const refusal = await checkStateBeforeStart({
          store: again,
          stateFile: file,
          init,
          sources: other,
          nowSeconds: 2,
          log: silentLogger,
        }).catch((e: unknown) => e);
        expect(refusal).toBeInstanceOf(ClusterMismatchError);
        expect((refusal as Error).message).toContain(
          `the state ${file} belongs to cluster "prod", but this controller's \`cluster\` is "local"`,
        );
        expect((refusal as Error).message).toContain('cluster: prod');
      }
      expect(listed).toBe(0);
      expect(again.getValue(CLUSTER_INITIALIZED_KEY)).toMatchObject({ clusterName: 'prod', how: 'new' });
      // Its own cluster's restart is ordinary.
      expect(
        await checkStateBeforeStart({
          store: again,
          stateFile: file,
          init: false,
          sources: prod,
          nowSeconds: 3,
          log: silentLogger,
        }),
      ).toBe('existing');
    } finally {
      again.close();
    }
  });
});
