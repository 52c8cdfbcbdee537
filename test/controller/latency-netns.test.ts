import { TAG_LAUNCH_TOKEN } from '../../src/cloud/provider.js';
import { workerEnvironment } from '../../src/cloud/local/worker-spawner.js';
import { WorkerRegistrar } from '../../src/controller/worker-identity/worker-registrar.js';
import { launchSecretFor } from '../../src/protocol/launch-secret.js';
import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/core/catalog.js';
import type { ClusterSnapshot } from '../../src/core/model.js';
import {
  LocalProvider,
  type LocalInstance,
  type WorkerSpawner,
} from '../../src/cloud/local/local-provider.js';
import { isWorkerOf } from '../../src/cloud/local/worker-spawner.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { SystemClock } from '../../src/controller/clock.js';
import { Controller } from '../../src/controller/controller.js';
import type { LatencyPair } from '../../src/controller/latency-matrix.js';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { ControllerScheduler } from '../../src/controller/scheduler-state.js';
import { WorkerTaskControl } from '../../src/controller/worker-task-control.js';
import { EvaScheduler } from '../../src/scheduler/eva.js';
import type { Plan } from '../../src/scheduler/types.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { CLI, ensureBuiltCli } from '../helpers/built-cli.js';
import { makeType } from '../helpers/catalogs.js';
import { until } from '../helpers/local-controller.js';
import { createDelayedLink, type DelayedLink } from '../helpers/netns.js';

/**
 * Round trips measured for real and carried to the scheduler. Two workers (the real `fleetwise worker`, process
 * executor) run in two network namespaces joined by a link that delays A → B by 5 ms (netem, or a userspace delay line
 * where the kernel has no netem: test/helpers/netns.ts); the controller (Eva, the worker protocol, the local provider
 * spawning the workers into the namespaces) runs in this process. A two-task job whose tasks cannot share an instance
 * puts one task in each namespace; the workers are told each other as peers, probe over the delayed link, and the
 * controller's matrix, its API and the next round's snapshot show a round trip of at least the delay. The job is
 * latency-sensitive (a tenth of its throughput at 2 ms): once its no-move window is over, the measured round trip moves it, and the
 * same rounds without the measurement would not.
 */

const DELAY_MS = 5;
/** The job may not move before this; long enough for the measurements to be checked where the job first ran. */
const NO_MOVE_SECONDS = 20;
const ADMIN_TOKEN = 'netns-admin-token-0123456789abcdef';
const WORKER_TOKEN = 'netns-worker-token-0123456789abcdef';
// One type that holds one task of the job: the plan needs two instances, one per namespace. Quick to launch, as
// local instances are (a move's price counts the new instance's launch), and priced like a GPU instance, so what a
// move saves within the young cluster's short horizon is above the decision rule's cent.
const catalog: Catalog = {
  provider: 'test',
  region: 'test',
  types: [
    {
      ...makeType('w.small', [0, 2, 4], 10),
      delays: {
        instantiateSeconds: 0.25,
        workerStartSeconds: 0.25,
        workerRegisterSeconds: 0.25,
        terminateSeconds: 1,
      },
    },
  ],
};
/** The counter example: progress, and a checkpoint every second (a move loses at most that). */
const COUNTER = join(PROJECT_ROOT, 'examples', 'counter', 'counter.sh');

let link: DelayedLink | undefined;
let scratch: string;
let controller: Controller | undefined;
let provider: LocalProvider | undefined;
let workers: WorkerTaskControl;
const servers: ApiServer[] = [];
const seen: ClusterSnapshot[] = [];
const plans: Plan[] = [];

/** Spawns the n-th instance's worker into namespace n mod 2, probing on its address on the delayed link. */
class NamespaceSpawner implements WorkerSpawner {
  private spawned = 0;
  constructor(
    private readonly net: DelayedLink,
    private readonly controllerUrls: () => readonly string[],
  ) {}

  spawn(instance: LocalInstance): number | undefined {
    const side = this.spawned++ % 2;
    const log = openSync(join(instance.dir, 'worker.log'), 'a');
    try {
      const child = spawn(
        'ip',
        [
          'netns',
          'exec',
          this.net.namespaces[side] as string,
          process.execPath,
          CLI,
          'worker',
          '--controller',
          this.controllerUrls()[side] as string,
          '--instance-id',
          instance.instanceId,
          '--executor',
          'process',
          '--work-dir',
          instance.dir,
          '--stop-tasks-on-exit',
          '--give-up-after-seconds',
          '60',
          '--probe-host',
          this.net.linkAddresses[side] as string,
          '--probe-interval-seconds',
          '0.25',
          '--probe-window-seconds',
          '3',
        ],
        {
          env: workerEnvironment(
            process.env,
            launchSecretFor(WORKER_TOKEN, instance.tags[TAG_LAUNCH_TOKEN] ?? instance.instanceId),
          ),
          detached: true,
          stdio: ['ignore', log, log],
        },
      );
      child.unref();
      return child.pid;
    } finally {
      closeSync(log);
    }
  }

  async kill(instance: LocalInstance): Promise<void> {
    if (instance.pid !== undefined && isWorkerOf(instance.pid, instance.instanceId))
      try {
        process.kill(-instance.pid, 'SIGKILL');
      } catch {
        // gone already
      }
    const executor = new ProcessExecutor({ stateDir: join(instance.dir, 'executor') });
    for (const task of await executor.list().catch(() => [])) {
      await executor.kill(task.taskId).catch(() => undefined);
      await executor.remove(task.taskId).catch(() => undefined);
    }
  }
}

function diagnostics(): string {
  return (provider?.instances() ?? [])
    .map((i) => {
      let text = '';
      try {
        text = readFileSync(join(i.dir, 'worker.log'), 'utf8');
      } catch {
        // not started
      }
      return `--- ${i.instanceId}\n${text.split('\n').slice(-15).join('\n')}`;
    })
    .join('\n');
}

beforeAll(async () => {
  ensureBuiltCli();
  scratch = mkdtempSync(join(tmpdir(), 'fleetwise-netns-'));
  link = await createDelayedLink(DELAY_MS);
  const net = link;
  const clock = new SystemClock();
  const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
  workers = new WorkerTaskControl({
    store,
    catalog,
    clock,
    registrar: new WorkerRegistrar({
      store,
      clusterName: 'netns',
      clusterKey: WORKER_TOKEN,
      describeInstance: async (cloudId) =>
        (await (provider as LocalProvider).list('netns', { includeTerminated: true })).find(
          (i) => i.instanceId === cloudId,
        ),
      launchCredential: { kind: 'launch-secret' },
    }),
    objectStoreLocation: join(scratch, 'objects'),
    heartbeatSeconds: 0.5,
    heartbeatTimeoutSeconds: 60,
  });
  const urls: string[] = [];
  provider = new LocalProvider({
    stateFile: join(scratch, 'local-instances.json'),
    instancesDir: join(scratch, 'instances'),
    catalog,
    spawner: new NamespaceSpawner(net, () => urls),
  });
  const eva = new EvaScheduler(catalog);
  const scheduler: ControllerScheduler = {
    name: eva.name,
    observe: (snapshot, observations) => eva.observe(snapshot, observations),
    plan: (snapshot) => {
      seen.push(snapshot);
      const plan = eva.plan(snapshot);
      plans.push(plan);
      return plan;
    },
  };
  controller = new Controller({
    store,
    catalog,
    provider,
    tasks: workers,
    workers,
    clock,
    scheduler,
    predict: false,
    settings: {
      clusterName: 'netns',
      roundSeconds: 1,
      pollSeconds: 0.25,
      caps: {},
      dryRun: false,
      orphanPolicy: 'adopt',
      vanishGraceSeconds: 60,
      registrationTimeoutSeconds: 120,
      registrationBackoffBaseSeconds: 60,
      registrationBackoffMaxSeconds: 3600,
      reportEverySeconds: 3600,
    },
  });
  // The workers of each namespace reach the controller over their own link to the root namespace.
  for (const control of net.control) {
    const server = await startApiServer(controller, {
      listen: `${control.rootAddress}:0`,
      adminToken: ADMIN_TOKEN,
      catalog,
      workers,
    });
    servers.push(server);
    urls.push(server.url);
  }
  await controller.start();
}, 180_000);

afterAll(async () => {
  await controller?.stop().catch(() => undefined);
  if (provider !== undefined)
    await provider.terminate(provider.instances().map((i) => i.instanceId)).catch(() => undefined);
  for (const server of servers) await server.close().catch(() => undefined);
  await link?.destroy();
  rmSync(scratch, { recursive: true, force: true });
}, 60_000);

describe('round trips between workers in two network namespaces', () => {
  it('reach the controller as about the link delay, are shown by the API, and move the latency-sensitive job', async () => {
    const net = link as DelayedLink;
    const ctl = controller as Controller;
    const spec = validateJobSpec(
      {
        name: 'pair',
        team: 'research',
        tasks: [
          {
            name: 'part',
            command: ['sh', COUNTER],
            env: { COUNT_TO: '1000000', STEP_SECONDS: '0.1', CHECKPOINT_SECONDS: '1' },
            demand: { w: [0, 1.5, 3] },
            replicas: 2,
          },
        ],
        // Performance falls to a tenth at 2 ms: the link's 5 ms costs the job nine tenths of its throughput.
        network: {
          sensitivity: [
            [100, 1],
            [2000, 0.1],
          ],
        },
        noMoveSeconds: NO_MOVE_SECONDS,
        expectedDurationSeconds: 86_400,
        // A move costs little (a quick restore and start), so the saving pays for it within the young cluster's
        // short horizon (Eva's T is the time since the first event until events have been seen).
        checkpoint: {
          signal: 'SIGTERM',
          timeoutSeconds: 2,
          restoreDelaySeconds: 0.25,
          initDelaySeconds: 0.25,
        },
      },
      'pair',
      catalog,
    );
    const job = ctl.submit(spec, 'research');

    // Both directions measured over a few probes: the peers were named, the probes crossed the delayed link. The
    // first probes also pay for ARP and cold processes on a busy machine: wait for a window (3 s) of warm ones.
    const measured = (): LatencyPair[] | undefined => {
      const pairs = workers
        .latencyView()
        .pairs.filter((p) => p.samples >= 5 && (p.maxMicroseconds ?? Infinity) < DELAY_MS * 1000 * 10);
      return pairs.length === 2 ? pairs : undefined;
    };
    const pairs = await until(
      `round trips of ${job.id} measured both ways (${net.mechanism})`,
      measured,
      90_000,
      diagnostics,
    );
    const placed = ctl.store.listTasks({ jobId: job.id }).map((t) => t.instanceId);
    expect(new Set(placed).size).toBe(2);
    expect(pairs.map((p) => [p.fromInstanceId, p.toInstanceId]).sort()).toEqual(
      [
        [placed[0], placed[1]],
        [placed[1], placed[0]],
      ].sort(),
    );
    for (const p of pairs) {
      // A → B frames wait DELAY_MS on the link, so every round trip either way takes at least that; what is on top
      // is the two network stacks and the workers' event loops on a shared machine.
      expect(p.p99Microseconds ?? 0).toBeGreaterThanOrEqual(DELAY_MS * 1000 * 0.95);
      expect(p.maxMicroseconds ?? 0).toBeGreaterThanOrEqual(p.p99Microseconds ?? Infinity);
      expect(p.failures).toBe(0);
    }
    // The probes listen where the workers said: their addresses on the delayed link, not on the control links.
    expect(
      workers
        .latencyView()
        .probes.map((p) => p.host)
        .sort(),
    ).toEqual([...net.linkAddresses].sort());

    // The API shows the same matrix.
    const answer = await fetch(`${servers[0]?.url ?? ''}/v1/cluster/latency`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(answer.status).toBe(200);
    const shown = (await answer.json()) as { pairs: LatencyPair[] };
    expect(shown.pairs.map((p) => [p.fromInstanceId, p.toInstanceId]).sort()).toEqual(
      pairs.map((p) => [p.fromInstanceId, p.toInstanceId]).sort(),
    );

    // A round after that plans with the measured round trips (ClusterSnapshot.measuredRtts).
    const before = seen.length;
    const snapshot = await until(
      'a round planning with the measured round trips',
      () => seen.slice(before).find((s) => (s.measuredRtts?.length ?? 0) === 2),
      30_000,
      diagnostics,
    );
    for (const rtt of snapshot.measuredRtts ?? [])
      expect(rtt.maxMicroseconds).toBeGreaterThanOrEqual(DELAY_MS * 1000 * 0.95);
    expect(snapshot.instances.map((i) => i.placement?.zone)).toEqual(['local', 'local']);

    // The measured round trip changes the plan: once the job may move, a round moves it (NoMora §5.3 through Eva's
    // decision rule, latency-migration.ts) ...
    const moved = await until(
      `a round moving ${job.id} for its measured round trip`,
      () =>
        plans.find(
          (p) =>
            p.decision.chosen === 'latency' &&
            p.decision.candidates.some((c) => c.name === 'latency' && (c.movedJobs ?? []).includes(job.id)),
        ),
      60_000,
      () => `${JSON.stringify(plans.at(-1)?.decision)}\n${diagnostics()}`,
    );
    expect(moved.decision.chosen).toBe('latency');
    // ... while the same rounds planned without the measurements (the domain's default round trip) keep it in place.
    const blind = new EvaScheduler(catalog);
    for (const recorded of seen.filter((x) => (x.measuredRtts?.length ?? 0) > 0)) {
      const plan = blind.plan({ ...recorded, measuredRtts: undefined });
      expect(plan.decision.candidates.some((c) => c.name === 'latency')).toBe(false);
    }
  }, 150_000);
});
