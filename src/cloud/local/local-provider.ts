import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import type { Catalog } from '../../core/catalog.js';
import { ValidationError } from '../../core/validation.js';
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

/**
 * The local provider (local mode): an "instance" is a worker process on this machine, started by
 * a WorkerSpawner with a catalog type's capacity (scaled down to the host, see host-capacity.ts). Launch, terminate and
 * list keep EC2's tag semantics (cluster tag, launch-token idempotency) in a JSON file under the state directory, so a
 * restarted controller finds its instances (and their still-running workers) again. The record is written before the
 * worker is spawned: a crash in between leaves an instance whose worker never registers, which the controller's
 * registration timeout replaces, never a second instance for the same token.
 *
 * Every local instance is on the one host, in zone `local`; a placement group asked for is recorded (tagged, as EC2
 * does) and always granted: processes on one host are as near as instances get.
 */

/** The one zone of local instances. */
export const LOCAL_ZONE = 'local';

export interface LocalInstance {
  readonly instanceId: string;
  readonly typeName: string;
  readonly state: 'running' | 'terminated';
  readonly tags: Readonly<Record<string, string>>;
  readonly launchTimeMs: number;
  readonly terminatedAtMs?: number | undefined;
  /** Working directory of the instance's worker (executor state, task directories, its log). */
  readonly dir: string;
  readonly pid?: number | undefined;
}

/** Starts and stops the worker process of a local instance. */
export interface WorkerSpawner {
  /** Start the worker; returns its pid. */
  spawn(instance: LocalInstance): number | undefined;
  /** Stop the worker and every task it started (the instance is gone). Idempotent. */
  kill(instance: LocalInstance): Promise<void>;
}

const instanceSchema = z.object({
  instanceId: z.string(),
  typeName: z.string(),
  state: z.enum(['running', 'terminated']),
  tags: z.record(z.string(), z.string()),
  launchTimeMs: z.number(),
  terminatedAtMs: z.number().optional(),
  dir: z.string(),
  pid: z.number().int().optional(),
});
const fileSchema = z.object({ version: z.literal(1), instances: z.array(instanceSchema) });

export interface LocalProviderOptions {
  /** The JSON file holding the instances (created on first launch). */
  readonly stateFile: string;
  /** Instance working directories go under here. */
  readonly instancesDir: string;
  readonly catalog: Catalog;
  readonly spawner: WorkerSpawner;
  readonly nowMs?: () => number;
}

export class LocalProvider implements CloudProvider {
  private readonly nowMs: () => number;

  constructor(private readonly options: LocalProviderOptions) {
    this.nowMs = options.nowMs ?? Date.now;
  }

  private load(): LocalInstance[] {
    let text: string;
    try {
      text = readFileSync(this.options.stateFile, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      throw new ValidationError(this.options.stateFile, [`not valid JSON: ${(e as Error).message}`]);
    }
    const parsed = fileSchema.safeParse(value);
    if (!parsed.success)
      throw new ValidationError(
        this.options.stateFile,
        parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`),
      );
    return parsed.data.instances;
  }

  /** Write atomically (temporary file + rename): a crash leaves the old file or the new one. */
  private save(instances: readonly LocalInstance[]): void {
    mkdirSync(dirname(this.options.stateFile), { recursive: true });
    const temp = `${this.options.stateFile}.${process.pid}.tmp`;
    writeFileSync(temp, `${JSON.stringify({ version: 1, instances }, null, 2)}\n`, { mode: 0o600 });
    renameSync(temp, this.options.stateFile);
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
    if (existing.length > 0)
      return Promise.resolve({
        instanceIds: existing.map((i) => i.instanceId),
        availabilityZone: LOCAL_ZONE,
        placementGroup: existing[0]?.tags[TAG_PLACEMENT_GROUP],
        reusedExisting: true,
      });
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
      },
      launchTimeMs: this.nowMs(),
      dir: join(this.options.instancesDir, instanceId),
    };
    mkdirSync(record.dir, { recursive: true });
    this.save([...instances, record]);
    const pid = this.options.spawner.spawn(record);
    if (pid !== undefined)
      this.save(this.load().map((i) => (i.instanceId === instanceId ? { ...i, pid } : i)));
    return Promise.resolve({
      instanceIds: [instanceId],
      availabilityZone: LOCAL_ZONE,
      placementGroup: req.placementGroup,
      reusedExisting: false,
    });
  }

  async terminate(instanceIds: readonly string[]): Promise<void> {
    const wanted = new Set(instanceIds);
    const instances = this.load();
    const now = this.nowMs();
    const gone: LocalInstance[] = [];
    const next = instances.map((i) => {
      if (!wanted.has(i.instanceId)) return i;
      const closed =
        i.state === 'terminated' ? i : { ...i, state: 'terminated' as const, terminatedAtMs: now };
      gone.push(closed);
      return closed;
    });
    // Recorded first: a crash mid-kill leaves a terminated record, and a retried terminate kills again (idempotent),
    // so an instance recorded terminated already is killed too: its worker and tasks may have outlived the crash.
    this.save(next);
    for (const inst of gone) await this.options.spawner.kill(inst);
  }

  // async: a corrupt state file rejects the promise (callers' .catch sees it) instead of throwing synchronously.
  async list(clusterName: string, options: ListOptions = {}): Promise<CloudInstance[]> {
    return this.load()
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
      }));
  }

  /** Every instance record (for start-up reports and tests). */
  instances(): LocalInstance[] {
    return this.load();
  }
}
