import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Catalog } from '../../core/catalog.js';
import {
  CloudProviderError,
  parseLaunchRequest,
  TAG_CLUSTER,
  TAG_INSTANCE_KEY,
  TAG_LAUNCH_TOKEN,
  TAG_PLACEMENT_GROUP,
  TAG_PLAN,
  type CloudInstance,
  type CloudProvider,
  type LaunchRequest,
  type LaunchResult,
  type ListOptions,
} from '../provider.js';
import { readWorkerExit } from './worker-exit-record.js';
import { LocalInstanceFile, type LocalInstance } from './instance-file.js';
import { findWorkerPid, isWorkerOf, type InstanceStopOutcome } from './worker-spawner.js';

export type { LocalInstance } from './instance-file.js';

/**
 * The local provider (local mode): an "instance" is a worker process on this machine, started by
 * a WorkerSpawner with a catalog type's capacity (scaled down to the host, see host-capacity.ts). Launch, terminate and
 * list keep EC2's tag semantics (cluster tag, launch-token idempotency) in a file under the state directory
 * (instance-file.ts: a snapshot and an append-only journal), so a
 * restarted controller finds its instances (and their still-running workers) again. The record is written before the
 * worker is spawned: a crash in between leaves a record without a worker, never a second instance for the same token;
 * the restarted controller spawns it (startUnstartedWorkers at its start, or a launch re-sent with that token) rather
 * than leaving the instance to its registration timeout.
 *
 * An instance ends with its worker: one whose worker is provably gone (its recorded pid no longer runs it) is closed
 * by a list(), at once when the worker recorded its exit (a worker that gave up, WORKER_EXIT_FILE), else after a short
 * grace (GONE_GRACE_MS), ending when its worker exited or was first seen gone; its leftover tasks are stopped. It is
 * not billed on until the controller's heartbeat timeout, nor lost to it as a worker gone silent.
 *
 * Tasks that could not be stopped when their instance ended (their Docker engine did not answer) are recorded on it
 * (`tasksLeft`): the instance stays ended, billed no longer, but its tasks may still run, and a job resumed elsewhere
 * would run twice. list() starts their stop again, at most once per TASK_STOP_RETRY_MS per instance and without
 * waiting for it (a slow engine must not slow down every sync); `fleetwise down` stops them too.
 *
 * Every local instance is on the one host, in zone `local`; a placement group asked for is recorded (tagged, as EC2
 * does) and always granted: processes on one host are as near as instances get.
 */

/** The one zone of local instances. */
export const LOCAL_ZONE = 'local';

/**
 * A local instance "bought" on spot keeps it in a tag: local mode stands in for EC2, markets included (spot prices
 * and, with a local metadata endpoint, interruption notices), so what the controller asked for is what it gets: spot
 * never runs out locally, so a request's `onDemandFallback` never comes into play.
 */
const LOCAL_MARKET_TAG = 'fleetwise:market';

/** Starts and stops the worker process of a local instance. */
export interface WorkerSpawner {
  /** Start the worker; returns its pid. */
  spawn(instance: LocalInstance): number | undefined;
  /** Stop the worker and every task it started (the instance is gone). Idempotent. */
  kill(instance: LocalInstance): Promise<void>;
  /**
   * `kill`, saying whether the instance's tasks were stopped. A spawner without it leaves no task behind that it could
   * stop (its workers run elsewhere, or it only records): its kill counts as a stop.
   */
  stop?(instance: LocalInstance): Promise<InstanceStopOutcome>;
}

/**
 * A worker that died without recording its exit is waited for at most this long before its instance is closed: time
 * for a supervisor to start it again (its saved credential registers it anew). It must end well inside the heartbeat
 * timeout (goneGraceWithin): a pass replaces silent workers before it lists the instances, so an instance still in its
 * grace at the timeout is taken for a silent worker, its process death unsaid. At the local defaults (1 s heartbeats,
 * a 10 s timeout, a 2 s poll), a killed worker is seen gone at most 3 s after its last heartbeat, and closed by the
 * first poll 3 s later: by 8 s.
 */
export const GONE_GRACE_MS = 3_000;

/**
 * The gone-worker grace that ends inside a heartbeat timeout: a killed worker is seen gone at most one heartbeat and
 * one poll after its last heartbeat, and closed at most a poll after its grace, so the grace is what the timeout leaves
 * of those, less a second's margin, and never over GONE_GRACE_MS. A timeout too short for any grace gets none: the
 * worker is then closed at the first poll that sees it gone.
 */
export function goneGraceWithin(timing: {
  readonly heartbeatSeconds: number;
  readonly heartbeatTimeoutSeconds: number;
  readonly pollSeconds: number;
}): number {
  const leftSeconds = timing.heartbeatTimeoutSeconds - timing.heartbeatSeconds - 2 * timing.pollSeconds - 1;
  return Math.max(0, Math.min(GONE_GRACE_MS, Math.floor(leftSeconds * 1000)));
}

/** Tasks an ended instance left running are tried again at most this often (each try may wait on a slow engine). */
export const TASK_STOP_RETRY_MS = 60_000;

export interface LocalProviderOptions {
  /** The JSON file holding the instances (created on first launch). */
  readonly stateFile: string;
  /** Instance working directories go under here. */
  readonly instancesDir: string;
  readonly catalog: Catalog;
  readonly spawner: WorkerSpawner;
  readonly nowMs?: () => number;
  /** How long a worker that died without a word may stay gone before its instance is closed (GONE_GRACE_MS). */
  readonly goneGraceMs?: number;
  /** How often leftover tasks are tried again (default TASK_STOP_RETRY_MS). */
  readonly taskStopRetryMs?: number;
}

export class LocalProvider implements CloudProvider {
  /** A local instance leaves the list when its worker process is gone (closeGoneWorkers). */
  readonly vanishedReason = 'its worker process is gone';
  private readonly nowMs: () => number;
  private readonly file: LocalInstanceFile;
  /** When this provider last began stopping each instance's tasks (Date.now: the retries' pace, not billing). */
  private readonly stopBeganMs = new Map<string, number>();
  /** When each running instance's worker was first seen gone, for the grace period before it is closed. */
  private readonly goneSinceMs = new Map<string, number>();
  /** Retried stops of leftover tasks still under way, by instance. */
  private readonly retrying = new Map<string, Promise<void>>();

  constructor(private readonly options: LocalProviderOptions) {
    this.nowMs = options.nowMs ?? Date.now;
    this.file = new LocalInstanceFile(options.stateFile);
  }

  private load(): LocalInstance[] {
    return this.file.all();
  }

  // async for the same reason as list(): state-file and spawn errors reject instead of throwing synchronously.
  async launch(request: LaunchRequest): Promise<LaunchResult> {
    const req = parseLaunchRequest(request); // async: a bad request rejects
    if (!this.options.catalog.types.some((t) => t.name === req.typeName))
      return Promise.reject(
        new CloudProviderError(`instance type ${req.typeName} is not in the catalog`, 'InvalidInstanceType'),
      );
    const instances = this.load();
    const existing = instances.filter(
      (i) => i.tags[TAG_LAUNCH_TOKEN] === req.idempotencyToken && i.tags[TAG_CLUSTER] === req.clusterName,
    );
    if (existing.length > 0) {
      for (const inst of existing) this.spawnIfNeverStarted(inst);
      return Promise.resolve({
        instanceIds: existing.map((i) => i.instanceId),
        availabilityZone: LOCAL_ZONE,
        placementGroup: existing[0]?.tags[TAG_PLACEMENT_GROUP],
        reusedExisting: true,
        ...(existing[0]?.tags[LOCAL_MARKET_TAG] === 'spot' ? { market: 'spot' as const } : {}),
      });
    }
    const instanceId = `local-${randomBytes(6).toString('hex')}`;
    const record: LocalInstance = {
      instanceId,
      typeName: req.typeName,
      state: 'running',
      tags: {
        ...req.tags,
        [TAG_CLUSTER]: req.clusterName,
        [TAG_PLAN]: req.planId,
        [TAG_INSTANCE_KEY]: req.instanceKey,
        [TAG_LAUNCH_TOKEN]: req.idempotencyToken,
        ...(req.placementGroup === undefined ? {} : { [TAG_PLACEMENT_GROUP]: req.placementGroup }),
        ...(req.market === 'spot' ? { [LOCAL_MARKET_TAG]: 'spot' } : {}),
      },
      launchTimeMs: this.nowMs(),
      dir: join(this.options.instancesDir, instanceId),
    };
    mkdirSync(record.dir, { recursive: true });
    this.file.write([record]);
    const pid = this.options.spawner.spawn(record);
    if (pid !== undefined) this.file.write([{ ...record, pid }]);
    return Promise.resolve({
      instanceIds: [instanceId],
      availabilityZone: LOCAL_ZONE,
      placementGroup: req.placementGroup,
      reusedExisting: false,
      ...(req.market === 'spot' ? { market: 'spot' as const } : {}),
    });
  }

  /**
   * An instance recorded without a pid (a crash between recording it and spawning its worker, or a spawn that
   * failed): when no worker of it runs and none recorded an exit, the worker is spawned now; otherwise its instance
   * would wait out the controller's registration timeout and be replaced, billed for nothing. A worker found running
   * (spawned, its pid never recorded) gets its pid recorded.
   */
  private spawnIfNeverStarted(inst: LocalInstance): boolean {
    if (inst.state !== 'running' || inst.pid !== undefined) return false;
    const found = findWorkerPid(inst.instanceId);
    if (found === undefined && readWorkerExit(inst.dir) !== undefined) return false;
    mkdirSync(inst.dir, { recursive: true });
    const pid = found ?? this.options.spawner.spawn(inst);
    if (pid !== undefined) this.file.write([{ ...inst, pid }]);
    return found === undefined && pid !== undefined;
  }

  /**
   * At a controller's start, once its API serves (the workers' address is known): the cluster's instances a crashed
   * controller recorded but never spawned a worker for get one. The start's cloud sync adopts such an instance by its
   * launch token, so its launch is not sent again to do it. Returns the instances whose worker was spawned.
   */
  startUnstartedWorkers(clusterName: string): string[] {
    return this.load()
      .filter((i) => i.tags[TAG_CLUSTER] === clusterName && this.spawnIfNeverStarted(i))
      .map((i) => i.instanceId);
  }

  /**
   * Close the running instances of the cluster whose worker is provably gone: no process runs it (checked by command
   * line, never by a bare pid another process may have taken). One that recorded its exit (it gave up) ends then, at
   * once; one that died without a word ends when it was first seen gone, once it has stayed gone for the grace period
   * (LocalProviderOptions.goneGraceMs): a worker started again meanwhile (by hand, as a supervisor on EC2 would,
   * with its saved credential) is found by its command line and kept, its new pid recorded. Their leftover tasks are
   * stopped as a terminate stops them. Returns the instances closed.
   */
  async closeGoneWorkers(clusterName: string): Promise<LocalInstance[]> {
    return (await this.closeGoneWorkersIn(clusterName)).closed;
  }

  /** closeGoneWorkers, also giving the records as they stand after it: one read of the file when nothing closed. */
  private async closeGoneWorkersIn(
    clusterName: string,
  ): Promise<{ closed: LocalInstance[]; instances: LocalInstance[] }> {
    const instances = this.load();
    this.retryLeftTasks(clusterName, instances);
    const now = this.nowMs();
    const graceMs = this.options.goneGraceMs ?? GONE_GRACE_MS;
    const exits = new Map<string, number>();
    let repidded = false;
    const gone = instances.filter((i) => {
      if (i.state !== 'running' || i.tags[TAG_CLUSTER] !== clusterName) return false;
      if (i.pid !== undefined && isWorkerOf(i.pid, i.instanceId)) {
        this.goneSinceMs.delete(i.instanceId);
        return false;
      }
      const exit = readWorkerExit(i.dir);
      // Never started (a record without a pid and no exit: startUnstartedWorkers' or an external worker's); looked
      // at before the scan of /proc below, which would cost every list a scan per such record.
      if (i.pid === undefined && exit === undefined) return false;
      const found = findWorkerPid(i.instanceId);
      if (found !== undefined) {
        this.goneSinceMs.delete(i.instanceId);
        if (i.pid !== undefined) {
          this.file.write([{ ...i, pid: found }]);
          repidded = true;
        }
        return false;
      }
      if (exit !== undefined) {
        exits.set(i.instanceId, exit.exitedAtMs);
        return true;
      }
      const since = this.goneSinceMs.get(i.instanceId) ?? now;
      this.goneSinceMs.set(i.instanceId, since);
      if (now - since < graceMs) return false;
      exits.set(i.instanceId, since);
      return true;
    });
    // A pid re-found above was written to the file: read it again so the records given are the file's.
    if (gone.length === 0) return { closed: [], instances: repidded ? this.load() : instances };
    const ids = gone.map((i) => i.instanceId);
    await this.terminate(ids, exits);
    const closed = new Set(ids);
    const after = this.load();
    return { closed: after.filter((i) => closed.has(i.instanceId)), instances: after };
  }

  /**
   * Terminate the instances: each ends now, or, given in `exitedAtMs` (a local stop waited for each worker to exit),
   * when its worker exited: an instance is billed while its worker runs, not while the others finish stopping.
   */
  async terminate(instanceIds: readonly string[], exitedAtMs?: ReadonlyMap<string, number>): Promise<void> {
    const wanted = new Set(instanceIds);
    const instances = this.load();
    const now = this.nowMs();
    const gone = instances.filter((i) => wanted.has(i.instanceId));
    // Never before its launch nor after now: a worker's exit is timed on this host's clock, as both are.
    const endOf = (i: LocalInstance): number =>
      Math.min(now, Math.max(i.launchTimeMs, exitedAtMs?.get(i.instanceId) ?? now));
    const closed = gone
      .filter((i) => i.state !== 'terminated')
      .map((i) => ({ ...i, state: 'terminated' as const, terminatedAtMs: endOf(i) }));
    // Recorded first: a crash mid-kill leaves a terminated record, and a retried terminate kills again (idempotent),
    // so an instance recorded terminated already is killed too: its worker and tasks may have outlived the crash.
    this.file.write(closed);
    // At once: each kill waits for its tasks' stops (bounded by the spawner), and one after the other they would add
    // up in the controller's round.
    await Promise.all(
      gone.map(async (inst) => this.recordTaskStop(inst.instanceId, await this.stopWorker(inst))),
    );
  }

  /** Stop an instance's worker and tasks, saying whether its tasks stopped. */
  private async stopWorker(inst: LocalInstance): Promise<InstanceStopOutcome> {
    this.stopBeganMs.set(inst.instanceId, Date.now());
    const { spawner } = this.options;
    if (spawner.stop !== undefined) return spawner.stop(inst);
    await spawner.kill(inst);
    return { tasksStopped: true };
  }

  /** Keep on the record the tasks that may still run, or clear them once they are stopped. */
  private recordTaskStop(instanceId: string, outcome: InstanceStopOutcome): void {
    const current = this.load().find((i) => i.instanceId === instanceId);
    if (current === undefined || current.state !== 'terminated') return;
    if (!outcome.tasksStopped) {
      // A retry that failed again changes nothing: no journal line a minute.
      if (current.tasksLeft?.join('\0') !== outcome.tasks.join('\0'))
        this.file.write([{ ...current, tasksLeft: [...outcome.tasks] }]);
      return;
    }
    if (current.tasksLeft === undefined) return;
    const { tasksLeft: _stopped, ...rest } = current;
    this.file.write([rest]);
  }

  /**
   * Start stopping again the tasks ended instances of the cluster left running, each at most once per retry period
   * and one at a time; not awaited: the caller (list(), on every sync's path) must not wait on a slow engine.
   */
  private retryLeftTasks(clusterName: string, instances: readonly LocalInstance[]): void {
    const nowMs = Date.now();
    const periodMs = this.options.taskStopRetryMs ?? TASK_STOP_RETRY_MS;
    for (const inst of instances) {
      const id = inst.instanceId;
      if (
        inst.tasksLeft === undefined ||
        inst.state !== 'terminated' ||
        inst.tags[TAG_CLUSTER] !== clusterName
      )
        continue;
      const began = this.stopBeganMs.get(id);
      if (this.retrying.has(id) || (began !== undefined && nowMs - began < periodMs)) continue;
      const retry = this.stopWorker(inst)
        .then((outcome) => this.recordTaskStop(id, outcome))
        // The spawner reports a failed stop itself; a record that cannot be written is seen by the next list().
        .catch(() => undefined)
        .finally(() => this.retrying.delete(id));
      this.retrying.set(id, retry);
    }
  }

  /** Settles once the retried stops of leftover tasks under way now are done (for a clean stop, and tests). */
  async leftTaskStopsDone(): Promise<void> {
    await Promise.all([...this.retrying.values()]);
  }

  // async: a corrupt state file rejects the promise (callers' .catch sees it) instead of throwing synchronously.
  async list(clusterName: string, options: ListOptions = {}): Promise<CloudInstance[]> {
    // A dead worker is seen at once, as EC2 lists an instance that stopped, not after the heartbeat timeout.
    const { instances } = await this.closeGoneWorkersIn(clusterName);
    return instances
      .filter((i) => i.tags[TAG_CLUSTER] === clusterName)
      .filter((i) => options.includeTerminated === true || i.state !== 'terminated')
      .map((i) => ({
        instanceId: i.instanceId,
        typeName: i.typeName,
        state: i.state,
        tags: { ...i.tags },
        launchTime: new Date(i.launchTimeMs),
        availabilityZone: LOCAL_ZONE,
        placementGroup: i.tags[TAG_PLACEMENT_GROUP],
        privateIpAddress: '127.0.0.1',
        market: i.tags[LOCAL_MARKET_TAG] === 'spot' ? ('spot' as const) : ('on-demand' as const),
        endedAt: i.terminatedAtMs === undefined ? undefined : new Date(i.terminatedAtMs),
        // Nothing reclaims a local instance: it ends by a stop or with its worker, never by EC2's interruption (a
        // spot one left unsaid would be taken for one and billed nothing).
        ...(i.state === 'terminated' ? { endedBySpotInterruption: false } : {}),
      }));
  }

  /** Every instance record (for start-up reports and tests). */
  instances(): LocalInstance[] {
    return this.load();
  }
}
