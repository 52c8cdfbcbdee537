import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TAG_CLUSTER, TAG_LAUNCH_TOKEN } from '../../src/cloud/provider.js';
import { storeGaugeRegistry } from '../../src/controller/api/metrics.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { ManualClock } from '../../src/controller/clock.js';
import { LatencyMatrix, plainAddress } from '../../src/controller/latency-matrix.js';
import { WorkerTaskControl } from '../../src/controller/worker-task-control.js';
import { LATENCY_MATRIX_KEY } from '../../src/controller/worker-latency.js';
import { WorkerRegistrar } from '../../src/controller/worker-identity/worker-registrar.js';
import { launchSecretFor } from '../../src/protocol/launch-secret.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import type { NetworkDeclaration } from '../../src/core/network.js';
import { RttEstimator } from '../../src/core/latency-model.js';
import { LatencyProber } from '../../src/worker/latency-probe.js';
import {
  heartbeatResponseSchema,
  MAX_PROBE_PEERS,
  type HeartbeatResponse,
  type NetworkReport,
  type RttReport,
} from '../../src/protocol/worker-protocol.js';
import { ADMIN_TOKEN, fakeWithTeams, VISION_TOKEN, type FakeControllerService } from './api-fake-service.js';
import { catalog, jobSpec } from './controller-fixtures.js';

/**
 * The latency matrix through the real worker protocol: WorkerTaskControl behind the real API server, heartbeats over
 * HTTP from three instances, two of which run the tasks of one job. What the workers are told (their peers), what
 * the controller keeps, shows (API, Prometheus) and plans with (the round's round trips), and what it refuses.
 */

const CLUSTER_KEY = 'worker-cluster-key-latency-0123';

/** Registration by each launch's one-time secret, as local workers register (ARCHITECTURE.md "Worker identity"). */
function registrarFor(store: FakeControllerService['store']): WorkerRegistrar {
  return new WorkerRegistrar({
    store,
    clusterName: 'latency-test',
    clusterKey: CLUSTER_KEY,
    describeInstance: async (cloudId) => {
      const inst = store.findInstanceByCloudId(cloudId);
      return inst === undefined
        ? undefined
        : {
            instanceId: cloudId,
            typeName: inst.typeName,
            state: 'running',
            tags: { [TAG_CLUSTER]: 'latency-test', [TAG_LAUNCH_TOKEN]: inst.launchToken },
            launchTime: undefined,
            availabilityZone: undefined,
            placementGroup: undefined,
            privateIpAddress: undefined,
          };
    },
    launchCredential: { kind: 'launch-secret' },
  });
}
const clock = new ManualClock(10_000);
let service: FakeControllerService;
let workers: WorkerTaskControl;
let server: ApiServer;
/** Per-instance worker tokens, by our instance id. */
const tokens = new Map<string, string>();

async function post(path: string, token: string, json: unknown): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(json),
  });
  return { status: response.status, body: (await response.json()) as unknown };
}

async function get(path: string, token = ADMIN_TOKEN): Promise<{ status: number; text: string }> {
  const response = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  return { status: response.status, text: await response.text() };
}

const beat = (instanceId: string, network?: unknown): Promise<{ status: number; body: unknown }> =>
  post('/v1/workers/heartbeat', tokens.get(instanceId) ?? '', {
    tasks: [],
    ...(network === undefined ? {} : { network }),
  });

const rtt = (peer: string, maxMicroseconds: number, p99Microseconds = maxMicroseconds): RttReport => ({
  peerInstanceId: peer,
  maxMicroseconds,
  p99Microseconds,
  samples: 6,
  failures: 0,
  windowSeconds: 60,
});

beforeAll(async () => {
  service = fakeWithTeams();
  const store = service.store;
  workers = new WorkerTaskControl({
    store,
    catalog,
    clock,
    registrar: registrarFor(store),
    objectStoreLocation: '/tmp/fleetwise-latency-objects',
    heartbeatSeconds: 5,
    heartbeatTimeoutSeconds: 60,
  });
  service.latency = () => workers.latencyView();
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN, workers });
  // inst-1 and inst-2 run the two tasks of job-1; inst-3 runs an unrelated job.
  for (const cloudId of ['i-0a', 'i-0b', 'i-0c']) {
    const inst = store.createInstance({ typeName: 'c7i.xlarge', launchToken: `launch-${cloudId}` });
    store.setInstanceState(inst.id, 'launching', { cloudId });
    store.setInstanceState(inst.id, 'running');
  }
  const pair = store.submitJob({
    ...jobSpec('pair', { c7i: [0, 4, 8] }, { team: 'vision', replicas: 2 }),
    network: { sensitivity: 'memcached', pattern: 'star', gibPerHour: 0 },
  });
  const alone = store.submitJob(jobSpec('alone', { c7i: [0, 4, 8] }, { team: 'nlp' }));
  store.setJobState(pair.id, 'starting');
  store.setTaskState(`${pair.id}.0`, 'running', 'inst-1');
  store.setTaskState(`${pair.id}.1`, 'running', 'inst-2');
  store.setJobState(alone.id, 'starting');
  store.setTaskState(`${alone.id}.0`, 'running', 'inst-3');
  for (const [cloudId, id] of [
    ['i-0a', 'inst-1'],
    ['i-0b', 'inst-2'],
    ['i-0c', 'inst-3'],
  ] as const) {
    const registered = await post('/v1/workers/register', launchSecretFor(CLUSTER_KEY, `launch-${cloudId}`), {
      instanceId: cloudId,
      executor: 'process',
      identity: { kind: 'launch-secret' },
    });
    expect(registered.status).toBe(200);
    tokens.set(id, (registered.body as { workerToken: string }).workerToken);
  }
});

afterAll(async () => {
  await server.close();
});

describe('the latency matrix over the worker protocol', () => {
  it('tells a probing worker the probes of the other instances of its jobs, and only a probing worker', async () => {
    // Nobody's probe is known yet.
    expect((await beat('inst-1', { probe: { port: 7071 } })).body).toMatchObject({ peers: [] });
    // inst-2 names its address; inst-1's is the one its heartbeat came from (loopback here).
    expect((await beat('inst-2', { probe: { host: '10.0.0.2', port: 7072 } })).body).toMatchObject({
      peers: [{ instanceId: 'inst-1', host: '127.0.0.1', port: 7071 }],
    });
    expect((await beat('inst-1', { probe: { port: 7071 } })).body).toMatchObject({
      peers: [{ instanceId: 'inst-2', host: '10.0.0.2', port: 7072 }],
    });
    // inst-3 shares no job with anyone: no peers, although it probes. It names its address: heartbeats from the one
    // inst-1 is seen at would leave neither probe known (a proxy's address, for all the controller can tell).
    expect((await beat('inst-3', { probe: { host: '10.0.0.3', port: 7073 } })).body).toMatchObject({
      peers: [],
    });
    // A worker without a probe gets the answer it always got.
    const plain = (await beat('inst-1')).body as Record<string, unknown>;
    expect(Object.keys(plain)).toEqual(['tasks']);
  });

  it('keeps what the workers measured, shows it (API, scoped; Prometheus) and plans with it', async () => {
    await beat('inst-1', { probe: { port: 7071 }, rtts: [rtt('inst-2', 5200, 5100)] });
    await beat('inst-2', {
      probe: { host: '10.0.0.2', port: 7072 },
      // inst-3 is no peer of inst-2's (they share no job): that pair was not asked for and is not kept.
      rtts: [rtt('inst-1', 4900), { peerInstanceId: 'inst-3', samples: 0, failures: 6, windowSeconds: 60 }],
    });
    const admin = JSON.parse((await get('/v1/cluster/latency')).text) as {
      scope: string;
      pairs: { fromInstanceId: string; toInstanceId: string; maxMicroseconds?: number; failures: number }[];
      probes: { instanceId: string; host: string }[];
    };
    expect(admin.scope).toBe('all');
    expect(admin.pairs.map((p) => [p.fromInstanceId, p.toInstanceId, p.maxMicroseconds, p.failures])).toEqual(
      [
        ['inst-1', 'inst-2', 5200, 0],
        ['inst-2', 'inst-1', 4900, 0],
      ],
    );
    expect(admin.probes.map((p) => [p.instanceId, p.host])).toEqual([
      ['inst-1', '127.0.0.1'],
      ['inst-2', '10.0.0.2'],
      ['inst-3', '10.0.0.3'],
    ]);
    const team = JSON.parse((await get('/v1/cluster/latency', VISION_TOKEN)).text) as {
      scope: string;
      pairs: unknown[];
      probes: unknown[];
    };
    expect([team.scope, team.pairs.length, team.probes]).toEqual(['team', 2, []]);

    const metrics = (await get('/metrics')).text;
    expect(metrics).toContain('fleetwise_instance_rtt_max_seconds{from="inst-1",to="inst-2"} 0.0052');
    expect(metrics).toContain('fleetwise_instance_rtt_p99_seconds{from="inst-1",to="inst-2"} 0.0051');
    expect(metrics).not.toContain('to="inst-3"');

    // The round plans with the measured pairs only (an unreached peer has no figure), and saves them.
    expect(workers.roundRtts()).toEqual([
      {
        fromInstanceId: 'inst-1',
        toInstanceId: 'inst-2',
        maxMicroseconds: 5200,
        p99Microseconds: 5100,
        atSeconds: 10_000,
      },
      {
        fromInstanceId: 'inst-2',
        toInstanceId: 'inst-1',
        maxMicroseconds: 4900,
        p99Microseconds: 4900,
        atSeconds: 10_000,
      },
    ]);
    expect(service.store.getValue(LATENCY_MATRIX_KEY)).toMatchObject({ pairs: expect.any(Array) });
  });

  it('refuses a report that breaks the bounds, naming the field, and records nothing of it', async () => {
    const refused = await beat('inst-1', { probe: { port: 7071 }, rtts: [rtt('inst-2', 5000, 9000)] });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain('network.rtts.0.p99Microseconds');
    const tooSlow = await beat('inst-1', { probe: { port: 7071 }, rtts: [rtt('inst-2', 120e6)] });
    expect(tooSlow.status).toBe(400);
    expect(JSON.stringify(tooSlow.body)).toContain('network.rtts.0.maxMicroseconds');
    // A probe address the workers could not connect to: `[fd00::5]` resolves to nothing, `fd00::5` is the address.
    const bracketed = await beat('inst-1', { probe: { host: '[fd00::5]', port: 7071 } });
    expect(bracketed.status).toBe(400);
    expect(JSON.stringify(bracketed.body)).toMatch(
      /network\.probe\.host[^"]*: give an IPv6 address without brackets/,
    );
    expect(workers.latencyView().pairs.find((p) => p.fromInstanceId === 'inst-1')?.maxMicroseconds).toBe(
      5200,
    );
    expect(workers.latencyView().probes.find((p) => p.instanceId === 'inst-1')?.host).toBe('127.0.0.1');
  });

  it('forgets a lost instance and hides pairs of instances that are gone', () => {
    workers.markLost('inst-2');
    expect(workers.latencyView().pairs).toEqual([]);
    expect(workers.latencyView().probes.map((p) => p.instanceId)).toEqual(['inst-1', 'inst-3']);
  });

  it('carries the matrix saved by the last round over a controller restart, until it goes stale', () => {
    const restarted = new WorkerTaskControl({
      store: service.store,
      catalog,
      clock,
      registrar: registrarFor(service.store),
      objectStoreLocation: '/tmp/fleetwise-latency-objects',
      heartbeatSeconds: 5,
      heartbeatTimeoutSeconds: 60,
    });
    expect(restarted.roundRtts().map((r) => [r.fromInstanceId, r.toInstanceId, r.maxMicroseconds])).toEqual([
      ['inst-1', 'inst-2', 5200],
      ['inst-2', 'inst-1', 4900],
    ]);
    clock.advance(301);
    expect(restarted.roundRtts()).toEqual([]);
    // The next round saves none of the stale pairs (nor will any later one: the saved matrix does not grow).
    restarted.roundRtts();
    expect(service.store.getValue(LATENCY_MATRIX_KEY)).toEqual({ pairs: [] });
  });
});

describe('whom a worker probes, and which of its round trips are kept', () => {
  // One instance (`hub`) runs a task of each of: `chatty` (declares traffic only, submitted first), `blind` (64 tasks,
  // no `network:`) and five latency-sensitive jobs of 64 tasks; every other task has an instance of its own. That is
  // 379 other instances, 315 of them peers of latency-sensitive jobs: more than an answer may name.
  const big = fakeWithTeams();
  const control = new WorkerTaskControl({
    store: big.store,
    catalog,
    clock,
    registrar: registrarFor(big.store),
    objectStoreLocation: '/tmp/fleetwise-latency-objects',
    heartbeatSeconds: 5,
    heartbeatTimeoutSeconds: 60,
  });
  big.latency = () => control.latencyView();
  const workerTokens = new Map<string, string>();
  /** Where each instance's heartbeats come from: an address of its own, as in a VPC without a proxy in between. */
  const addresses = new Map<string, string>();
  const sensitive: NetworkDeclaration = { sensitivity: 'memcached', pattern: 'star', gibPerHour: 0 };
  let hub = '';
  let chattyPeer = '';
  const blindPeers: string[] = [];
  /** The other instances of each latency-sensitive job, in submission order. */
  const widePeers: string[][] = [];
  const send = (instanceId: string, network: NetworkReport): HeartbeatResponse =>
    control.heartbeat(
      workerTokens.get(instanceId) ?? '',
      { tasks: [], network: { rtts: [], ...network } },
      { remoteAddress: addresses.get(instanceId) },
    );
  const named = (answer: HeartbeatResponse): string[] => (answer.peers ?? []).map((p) => p.instanceId);

  beforeAll(async () => {
    const store = big.store;
    const place = (spec: JobSpec, instances: readonly string[]): void => {
      const job = store.submitJob(spec);
      store.setJobState(job.id, 'starting');
      instances.forEach((id, i) => store.setTaskState(`${job.id}.${i}`, 'running', id));
    };
    const newInstance = async (): Promise<string> => {
      const n = workerTokens.size;
      const inst = store.createInstance({ typeName: 'c7i.xlarge', launchToken: `launch-big-${n}` });
      store.setInstanceState(inst.id, 'launching', { cloudId: `i-big${n}` });
      store.setInstanceState(inst.id, 'running');
      const registered = await control.register(launchSecretFor(CLUSTER_KEY, `launch-big-${n}`), {
        instanceId: `i-big${n}`,
        executor: 'process',
        identity: { kind: 'launch-secret' },
      });
      workerTokens.set(inst.id, registered.workerToken);
      addresses.set(inst.id, `10.1.${Math.floor(n / 200)}.${(n % 200) + 10}`);
      return inst.id;
    };
    const newInstances = async (count: number): Promise<string[]> => {
      const ids: string[] = [];
      for (let i = 0; i < count; i++) ids.push(await newInstance());
      return ids;
    };
    hub = await newInstance();
    chattyPeer = await newInstance();
    place(
      {
        ...jobSpec('chatty', { c7i: [0, 4, 8] }, { team: 'vision', replicas: 2 }),
        network: { sensitivity: 'none', pattern: 'all-to-all', gibPerHour: 4 },
      },
      [hub, chattyPeer],
    );
    blindPeers.push(...(await newInstances(63)));
    place(jobSpec('blind', { c7i: [0, 4, 8] }, { team: 'vision', replicas: 64 }), [hub, ...blindPeers]);
    for (let j = 0; j < 5; j++) {
      const others = await newInstances(63);
      widePeers.push(others);
      place(
        { ...jobSpec(`wide-${j}`, { c7i: [0, 4, 8] }, { team: 'vision', replicas: 64 }), network: sensitive },
        [hub, ...others],
      );
    }
    // Every worker announces its probe.
    for (const id of workerTokens.keys()) send(id, { probe: { port: 7071 } });
  });

  it('names at most the protocol allows, latency-sensitive jobs first, and no peer of a job without `network:`', () => {
    const answer = send(hub, { probe: { port: 7071 } });
    // What the worker's client checks every answer against.
    expect(heartbeatResponseSchema.safeParse(answer).success).toBe(true);
    expect(named(answer)).toEqual(widePeers.flatMap((peers) => [...peers].sort()).slice(0, MAX_PROBE_PEERS));
    // An instance that shares only the job without `network:` has nobody to probe; one sharing a job that declares
    // traffic probes its peer.
    expect(named(send(blindPeers[0] as string, { probe: { port: 7071 } }))).toEqual([]);
    expect(named(send(chattyPeer, { probe: { port: 7071 } }))).toEqual([hub]);
  });

  it('keeps one pair per named peer, the slower of duplicates, and shows and plans with the same figure', async () => {
    const [peer, unreached] = widePeers[0] as string[];
    send(hub, {
      probe: { port: 7071 },
      rtts: [
        rtt(hub, 5), // itself
        rtt(blindPeers[0] as string, 10), // not a peer it was asked to measure
        rtt(chattyPeer, 10), // a peer, but beyond what the last answer named
        rtt(peer as string, 900),
        rtt(peer as string, 10),
        { peerInstanceId: unreached as string, samples: 0, failures: 6, windowSeconds: 60 },
        { peerInstanceId: peer as string, samples: 0, failures: 6, windowSeconds: 60 },
      ],
    });
    expect(
      control
        .latencyView()
        .pairs.map((p) => [p.fromInstanceId, p.toInstanceId, p.maxMicroseconds, p.failures]),
    ).toEqual([
      [hub, peer, 900, 0],
      [hub, unreached, undefined, 6],
    ]);
    const metrics = await storeGaugeRegistry(big).metrics();
    const series = metrics
      .split('\n')
      .filter((l) => l.startsWith(`fleetwise_instance_rtt_max_seconds{from="${hub}"`));
    expect(series).toEqual([`fleetwise_instance_rtt_max_seconds{from="${hub}",to="${peer}"} 0.0009`]);
    expect(metrics).toContain(`fleetwise_instance_rtt_probe_failures{from="${hub}",to="${unreached}"} 6`);
    const planned = control.roundRtts();
    expect(planned.map((r) => [r.fromInstanceId, r.toInstanceId, r.maxMicroseconds])).toEqual([
      [hub, peer, 900],
    ]);
    expect(new RttEstimator(planned).measuredBetween(hub, peer as string)).toBe(900);
  });

  it('after a restart, keeps the saved pairs until a report follows an answer of this process', () => {
    const [peer, unreached] = widePeers[0] as string[];
    const restarted = new WorkerTaskControl({
      store: big.store,
      catalog,
      clock,
      registrar: registrarFor(big.store),
      objectStoreLocation: '/tmp/fleetwise-latency-objects',
      heartbeatSeconds: 5,
      heartbeatTimeoutSeconds: 60,
    });
    const beatRestarted = (rtts: RttReport[]): HeartbeatResponse =>
      restarted.heartbeat(workerTokens.get(hub) ?? '', {
        tasks: [],
        network: { probe: { port: 7071 }, rtts },
      });
    const hubPairs = (): [string, number | undefined][] =>
      restarted
        .latencyView()
        .pairs.filter((p) => p.fromInstanceId === hub)
        .map((p) => [p.toInstanceId, p.maxMicroseconds]);
    const saved = [
      [peer, 900],
      [unreached, undefined],
    ];
    expect(hubPairs()).toEqual(saved);
    // This process has named the hub no peers yet: its report is not taken and the saved pairs stay. Its answer names
    // none either: no peer's probe has been heard of since the restart.
    expect(beatRestarted([rtt(peer as string, 50), rtt(hub, 1)]).peers).toEqual([]);
    expect(hubPairs()).toEqual(saved);
    restarted.heartbeat(workerTokens.get(peer as string) ?? '', {
      tasks: [],
      network: { probe: { host: '10.1.0.2', port: 7071 }, rtts: [] },
    });
    expect(beatRestarted([rtt(peer as string, 60)]).peers?.map((p) => p.instanceId)).toEqual([peer]);
    // The report after an answer naming `peer` is taken, as the whole of the hub's window.
    beatRestarted([rtt(peer as string, 60), rtt(hub, 1)]);
    expect(hubPairs()).toEqual([[peer, 60]]);
  });
});

describe('workers whose heartbeats all come from one address (a load balancer or proxy in front of the controller)', () => {
  // Two instances run the two tasks of a latency-sensitive job; their workers (real probes, on loopback) heartbeat
  // over HTTP, so the controller sees both at 127.0.0.1, as it would see every worker at a balancer's address.
  const shared = fakeWithTeams();
  const control = new WorkerTaskControl({
    store: shared.store,
    catalog,
    clock,
    registrar: registrarFor(shared.store),
    objectStoreLocation: '/tmp/fleetwise-latency-objects',
    heartbeatSeconds: 5,
    heartbeatTimeoutSeconds: 60,
  });
  shared.latency = () => control.latencyView();
  let api: ApiServer;
  const workerTokens = new Map<string, string>();
  const probers: LatencyProber[] = [];
  const ids: string[] = [];

  const heartbeat = async (id: string, prober: LatencyProber): Promise<HeartbeatResponse> => {
    const response = await fetch(`${api.url}/v1/workers/heartbeat`, {
      method: 'POST',
      headers: { authorization: `Bearer ${workerTokens.get(id) ?? ''}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tasks: [], network: prober.heartbeatReport() }),
    });
    expect(response.status).toBe(200);
    return heartbeatResponseSchema.parse(await response.json());
  };
  /** A worker's probe, `--probe-host` given or not. */
  const probe = async (probeHost?: string): Promise<LatencyProber> => {
    const prober = await LatencyProber.start({
      port: 0,
      listenHost: '127.0.0.1',
      advertisedHost: probeHost,
      intervalSeconds: 3600,
    });
    probers.push(prober);
    return prober;
  };
  const told = (answer: HeartbeatResponse): [string, string][] =>
    (answer.peers ?? []).map((p) => [p.instanceId, p.host]);

  beforeAll(async () => {
    api = await startApiServer(shared, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN, workers: control });
    for (const cloudId of ['i-0d', 'i-0e']) {
      const inst = shared.store.createInstance({ typeName: 'c7i.xlarge', launchToken: `launch-${cloudId}` });
      shared.store.setInstanceState(inst.id, 'launching', { cloudId });
      shared.store.setInstanceState(inst.id, 'running');
      const registered = await control.register(launchSecretFor(CLUSTER_KEY, `launch-${cloudId}`), {
        instanceId: cloudId,
        executor: 'process',
        identity: { kind: 'launch-secret' },
      });
      workerTokens.set(inst.id, registered.workerToken);
      ids.push(inst.id);
    }
    const job = shared.store.submitJob({
      ...jobSpec('behind-proxy', { c7i: [0, 4, 8] }, { team: 'vision', replicas: 2 }),
      network: { sensitivity: 'memcached', pattern: 'star', gibPerHour: 0 },
    });
    shared.store.setJobState(job.id, 'starting');
    ids.forEach((id, i) => shared.store.setTaskState(`${job.id}.${i}`, 'running', id));
  });

  afterAll(async () => {
    for (const prober of probers) await prober.stop();
    await api.close();
  });

  it('hands out no probe at the shared address, and the probes the workers name once they give --probe-host', async () => {
    const [a, b] = ids as [string, string];
    const [bareA, bareB] = [await probe(), await probe()];
    expect(told(await heartbeat(a, bareA))).toEqual([]);
    // b's heartbeat comes from where a's did: neither is at that address, so neither is told the other's probe.
    expect(told(await heartbeat(b, bareB))).toEqual([]);
    expect(told(await heartbeat(a, bareA))).toEqual([]);
    expect(control.latencyView().probes).toEqual([]);

    // Restarted with --probe-host, each names its own address, and each is told the other's.
    const [namedA, namedB] = [await probe('10.0.0.11'), await probe('10.0.0.12')];
    await heartbeat(a, namedA);
    expect(told(await heartbeat(b, namedB))).toEqual([[a, '10.0.0.11']]);
    expect(told(await heartbeat(a, namedA))).toEqual([[b, '10.0.0.12']]);
    expect(control.latencyView().probes.map((p) => [p.instanceId, p.host, p.port])).toEqual([
      [a, '10.0.0.11', namedA.port],
      [b, '10.0.0.12', namedB.port],
    ]);
  });
});

describe('LatencyMatrix', () => {
  it('keeps only pairs to the peers the last answer named', () => {
    const m = new LatencyMatrix();
    m.observe('inst-2', { probe: { port: 7071 } }, '10.0.0.2', 0);
    m.observe('inst-3', { probe: { port: 7071 } }, '10.0.0.3', 0);
    expect(m.probePeers('inst-1', ['inst-3', 'inst-2', 'inst-3', 'inst-1']).map((p) => p.instanceId)).toEqual(
      ['inst-3', 'inst-2'],
    );
    m.probePeers('inst-1', ['inst-3']);
    m.observe('inst-1', { rtts: [rtt('inst-2', 100), rtt('inst-3', 200)] }, undefined, 1);
    expect(m.view(1).pairs.map((p) => p.toInstanceId)).toEqual(['inst-3']);
  });

  it('treats an address several instances are seen at as none of theirs, warning once, while probes named there stand', () => {
    const warnings: { message: string; data?: Record<string, unknown> }[] = [];
    const m = new LatencyMatrix(300, { warn: (message, data) => void warnings.push({ message, data }) });
    const peersOf = (from: string): string[] =>
      m.probePeers(from, ['inst-1', 'inst-2', 'inst-3', 'inst-4', 'inst-5']).map((p) => p.instanceId);
    m.observe('inst-1', { probe: { port: 7071 } }, '10.0.0.9', 0);
    expect(peersOf('inst-9')).toEqual(['inst-1']);
    m.observe('inst-2', { probe: { port: 7071 } }, '::ffff:10.0.0.9', 0);
    m.observe('inst-3', { probe: { port: 7071 } }, '10.0.0.9', 0);
    m.observe('inst-4', { probe: { port: 7071 } }, '10.0.0.4', 0);
    // A probe a worker names is its own, at an address others are seen at or not (local workers all name 127.0.0.1).
    m.observe('inst-5', { probe: { host: '10.0.0.9', port: 7075 } }, '10.0.0.9', 0);
    expect(peersOf('inst-9')).toEqual(['inst-4', 'inst-5']);
    expect(m.endpointOf('inst-1')).toBeUndefined();
    expect(m.view(0).probes.map((p) => p.instanceId)).toEqual(['inst-4', 'inst-5']);
    // Named once, when it was first shared, with the instances seen there.
    expect(warnings).toEqual([
      {
        message: expect.stringMatching(/inst-1, inst-2 come from one address, 10\.0\.0\.9 .*--probe-host/),
        data: { address: '10.0.0.9', instances: ['inst-1', 'inst-2'] },
      },
    ]);
    // One left behind the address is no more at it than before; one that names its address is known again.
    m.forget('inst-2');
    m.observe('inst-3', { probe: { host: '10.0.0.3', port: 7071 } }, '10.0.0.9', 1);
    expect(peersOf('inst-9')).toEqual(['inst-3', 'inst-4', 'inst-5']);
    // Once nobody is seen there, the address may be an instance's own again (and is warned of if shared again).
    m.forget('inst-1');
    m.observe('inst-6', { probe: { port: 7071 } }, '10.0.0.9', 2);
    expect(m.endpointOf('inst-6')).toMatchObject({ host: '10.0.0.9' });
    m.observe('inst-7', { probe: { port: 7071 } }, '10.0.0.9', 2);
    expect(m.endpointOf('inst-6')).toBeUndefined();
    expect(warnings.map((w) => w.data?.instances)).toEqual([
      ['inst-1', 'inst-2'],
      ['inst-6', 'inst-7'],
    ]);
  });

  it('takes the address a dual-stack socket reports for an IPv4 peer as the plain IPv4 address', () => {
    expect(plainAddress('::ffff:10.0.0.7')).toBe('10.0.0.7');
    expect(plainAddress('fe80::1')).toBe('fe80::1');
    const m = new LatencyMatrix();
    m.observe('inst-1', { probe: { port: 7071 } }, '::ffff:10.0.0.7', 0);
    expect(m.endpointOf('inst-1')).toMatchObject({ host: '10.0.0.7', port: 7071 });
  });

  it("replaces a worker's pairs with its latest report, keeps others', and only shows live instances", () => {
    const m = new LatencyMatrix(300);
    for (const n of [1, 2, 3]) m.observe(`inst-${n}`, { probe: { port: 7071 } }, `10.0.0.${n}`, 0);
    m.probePeers('inst-1', ['inst-2', 'inst-3']);
    m.probePeers('inst-2', ['inst-1']);
    m.observe('inst-1', { rtts: [rtt('inst-2', 100), rtt('inst-3', 900)] }, undefined, 0);
    m.observe('inst-2', { rtts: [rtt('inst-1', 120)] }, undefined, 0);
    m.observe('inst-1', { rtts: [rtt('inst-2', 150)] }, undefined, 10);
    expect(m.view(20).pairs.map((p) => [p.fromInstanceId, p.toInstanceId, p.maxMicroseconds])).toEqual([
      ['inst-1', 'inst-2', 150],
      ['inst-2', 'inst-1', 120],
    ]);
    expect(m.view(20, new Set(['inst-1', 'inst-2'])).pairs).toHaveLength(2);
    // inst-2's report is from t=0: stale at 301, inst-1's (t=10) not yet.
    expect(m.view(301).pairs.map((p) => p.fromInstanceId)).toEqual(['inst-1']);
    expect(m.view(301, new Set(['inst-1'])).pairs).toEqual([]);
    m.observe('inst-1', { rtts: [rtt('inst-2', 150)] }, undefined, 305);
    expect(m.view(311).pairs).toHaveLength(1);
    expect(m.view(611).pairs).toEqual([]);
  });

  it('drops for good, and saves no more, the pairs and probes of instances gone or silent: bounded by the live cluster', () => {
    const m = new LatencyMatrix(300);
    // 5,000 instances came and went over a day, each reporting a pair to the next and its probe, from its address.
    const goneAddress = (i: number): string => `10.9.${Math.floor(i / 250)}.${(i % 250) + 1}`;
    for (let i = 0; i < 5000; i++) {
      m.observe(`gone-${i + 1}`, { probe: { port: 7071 } }, goneAddress(i + 1), i * 10);
      m.probePeers(`gone-${i}`, [`gone-${i + 1}`]);
      m.observe(
        `gone-${i}`,
        { probe: { port: 7071 }, rtts: [rtt(`gone-${i + 1}`, 100)] },
        goneAddress(i),
        i * 10,
      );
    }
    const live = new Set(['inst-1', 'inst-2']);
    m.observe('inst-1', { probe: { port: 7071 } }, '10.0.0.2', 50_000);
    m.observe('inst-2', { probe: { port: 7072 } }, '10.0.0.3', 50_000);
    m.probePeers('inst-1', ['inst-2', 'gone-4999']);
    m.probePeers('inst-2', ['inst-1']);
    m.observe(
      'inst-1',
      { probe: { port: 7071 }, rtts: [rtt('inst-2', 100), rtt('gone-4999', 100)] },
      '10.0.0.2',
      50_000,
    );
    m.observe('inst-2', { probe: { port: 7072 }, rtts: [rtt('inst-1', 110)] }, '10.0.0.3', 50_000);
    // What is saved is fresh at the latest report: the last gone instances' pairs (within 300 s) and the live ones:
    const pairsSaved = (): string[] =>
      (m.toJson() as { pairs: { fromInstanceId: string; toInstanceId: string }[] }).pairs.map(
        (p) => `${p.fromInstanceId}>${p.toInstanceId}`,
      );
    // gone-4970 … gone-4999's 30 pairs and the live instances' 3 (one of them to gone-4999), not 5,000.
    expect(pairsSaved()).toHaveLength(30 + 3);
    // A view with the live instances drops every other pair and probe, also from what is saved next.
    expect(m.view(50_010, live).pairs.map((p) => `${p.fromInstanceId}>${p.toInstanceId}`)).toEqual([
      'inst-1>inst-2',
      'inst-2>inst-1',
    ]);
    expect(pairsSaved().sort()).toEqual(['inst-1>inst-2', 'inst-2>inst-1']);
    expect(m.probePeers('inst-1', ['gone-4999', 'gone-0', 'inst-2']).map((p) => p.instanceId)).toEqual([
      'inst-2',
    ]);
    // Workers that stop reporting: their pairs and probes go once stale, live or not.
    m.view(50_301);
    expect(pairsSaved()).toEqual([]);
    expect(m.endpointOf('inst-1')).toBeUndefined();
  });

  it('loads saved pairs only into an empty matrix, and ignores a malformed saved value', () => {
    const m = new LatencyMatrix();
    m.observe('inst-2', { probe: { port: 7071 } }, '10.0.0.2', 0);
    m.probePeers('inst-1', ['inst-2']);
    m.observe('inst-1', { rtts: [rtt('inst-2', 100)] }, undefined, 0);
    const saved = m.toJson();
    const fresh = new LatencyMatrix();
    fresh.load({ pairs: 'nonsense' });
    expect(fresh.view(0).pairs).toEqual([]);
    fresh.load(saved);
    expect(fresh.view(0).pairs).toEqual(m.view(0).pairs);
    const busy = new LatencyMatrix();
    busy.observe('inst-8', { probe: { port: 7071 } }, '10.0.0.8', 0);
    busy.probePeers('inst-9', ['inst-8']);
    busy.observe('inst-9', { rtts: [rtt('inst-8', 1)] }, undefined, 0);
    busy.load(saved);
    expect(busy.view(0).pairs.map((p) => p.fromInstanceId)).toEqual(['inst-9']);
  });
});
