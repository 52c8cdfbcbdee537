import type { Readable } from 'node:stream';
import { readAll } from '../../src/storage/streams.js';
import { findType, type Catalog } from '../../src/core/catalog.js';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import type { ApiControllerService } from '../../src/controller/api/server.js';
import type { ContextInfo } from '../../src/controller/artifacts.js';
import { arrayJobSpec, pairedArrays } from '../../src/controller/array-jobs.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import { ValidationError } from '../../src/core/validation.js';
import type { LatencyMatrixView } from '../../src/controller/latency-matrix.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type {
  ClusterView,
  CostReport,
  SubmissionCommitHook,
  WhyRecord,
} from '../../src/controller/service.js';
import type { InstanceRecord, JobRecord } from '../../src/controller/state-store.js';
import type { WorkerEndpoint } from '../../src/controller/api/routes-workers.js';
import { WorkerProtocolError } from '../../src/controller/worker-task-control.js';
import type {
  HeartbeatRequest,
  HeartbeatResponse,
  RegisterRequest,
  RegisterResponse,
} from '../../src/protocol/worker-protocol.js';

/**
 * A ControllerService for API and CLI tests: the real MemoryStateStore, actions applied to it directly (no
 * scheduler, no cloud), and a record of what the API asked for.
 */
export class FakeControllerService implements ApiControllerService {
  readonly store = new MemoryStateStore({ storeId: 'api-test' });
  readonly catalog: Catalog = loadCatalogFile();
  readonly roundRequests: string[] = [];
  readonly contexts = new Map<string, { archive: Buffer; info: ContextInfo }>();
  /** Who uploaded each context (undefined: the admin). */
  readonly contextUploaders = new Map<string, Set<string | undefined>>();
  reportsWritten = 0;
  /** Per-job costs the fake reports (the controller computes them from instance time). */
  jobCosts = new Map<string, number>();
  /** The latency matrix, when a test serves one (the controller's comes from its workers). */
  latency?: () => LatencyMatrixView;

  submit(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): JobRecord {
    const job = this.store.transaction(() => {
      const recorded = this.store.submitJob({ ...spec, team });
      inCommit?.([recorded]);
      return recorded;
    });
    this.requestRound(`submitted ${job.id}`);
    return job;
  }

  submitArray(spec: JobSpec, team: string, inCommit?: SubmissionCommitHook): JobRecord[] {
    return this.store.transaction(() => {
      const paired = pairedArrays(spec, team, this.store);
      if (paired.problems.length > 0) throw new ValidationError('job spec', paired.problems);
      const jobs: JobRecord[] = [];
      for (let index = 0; index < (spec.arrayProperties?.size ?? 0); index++)
        jobs.push(this.submit(arrayJobSpec(spec, index, paired.arrays, jobs.at(-1)), team));
      inCommit?.(jobs);
      return jobs;
    });
  }

  cancel(jobId: string, reason = 'cancelled through the API'): JobRecord {
    const job = this.store.setJobState(jobId, 'cancelled', reason);
    this.requestRound(`cancelled ${jobId}`);
    return job;
  }

  cancelMany(jobIds: readonly string[], reason: string): JobRecord[] {
    return this.store.transaction(() => jobIds.map((id) => this.cancel(id, reason)));
  }

  drain(instanceId: string): InstanceRecord {
    return this.store.setInstanceState(instanceId, 'draining', { reason: 'drained through the API' });
  }

  cluster(): ClusterView {
    const instances = this.store
      .listInstances()
      .filter((i) => i.state !== 'terminated')
      .map((i) => ({
        ...i,
        costPerHour: findType(this.catalog, i.typeName).costPerHour,
        taskIds: this.store.listTasks({ instanceId: i.id }).map((t) => t.id),
      }));
    return {
      orphans: [],
      instances,
      tasks: this.store.listTasks({ states: ['pending', 'starting', 'running', 'checkpointing'] }),
      costPerHour: instances.reduce((sum, i) => sum + i.costPerHour, 0),
    };
  }

  why(jobId: string, limit = 20): WhyRecord[] {
    return this.store
      .listRounds()
      .filter(
        (r) =>
          r.decision.waiting.some((w) => w.jobId === jobId) ||
          r.configuration.instances.some((i) => i.taskIds.some((t) => t.startsWith(`${jobId}.`))),
      )
      .slice(0, limit)
      .map((r) => {
        const waiting = r.decision.waiting.find((w) => w.jobId === jobId);
        return {
          round: r.round,
          atSeconds: r.atSeconds,
          summary: waiting === undefined ? 'placed' : `waiting: cap ${waiting.cap}`,
          decision: r.decision,
        };
      });
  }

  /** The periods asked for, as [since, until]. */
  readonly costPeriods: [number, number | undefined][] = [];

  costs(sinceSeconds = 0, untilSeconds?: number): CostReport {
    this.costPeriods.push([sinceSeconds, untilSeconds]);
    const jobs = this.store.listJobs();
    const byJob = jobs.map((j) => ({
      id: j.id,
      team: j.team,
      name: j.name,
      cost: this.jobCosts.get(j.id) ?? 0,
    }));
    const teams = [...new Set(jobs.map((j) => j.team))];
    const byTeam = teams.map((t) => ({
      id: t,
      cost: byJob.filter((j) => j.team === t).reduce((s, j) => s + j.cost, 0),
    }));
    const total = byJob.reduce((s, j) => s + j.cost, 0);
    return {
      generatedAtSeconds: Math.min(untilSeconds ?? Infinity, Date.now() / 1000),
      sinceSeconds,
      totalCost: total + 0.5,
      byJob,
      byTeam,
      byInstance: [{ id: 'inst-1', typeName: 'p3.2xlarge', cost: total + 0.5, idleCost: 0.5 }],
      idleCost: 0.5,
      migrationOverheadCost: 0,
    };
  }

  requestRound(reason: string): void {
    this.roundRequests.push(reason);
  }

  async writeReport(): Promise<string> {
    this.reportsWritten++;
    return `memory://reports/${this.reportsWritten}.json`;
  }

  /** Reads the upload whole (a fake's liberty) and keeps it in memory; a failing upload stores nothing. */
  async storeContext(upload: Readable, info: ContextInfo): Promise<string> {
    const archive = await readAll(upload);
    const ref = `contexts/${info.sha256}.tar.gz`;
    this.contexts.set(ref, { archive, info });
    this.contextUploaders.set(ref, new Set([...(this.contextUploaders.get(ref) ?? []), info.team]));
    return ref;
  }

  /** As the controller's: only the exact reference an upload answered, and for a team only its own uploads. */
  async buildContextProblem(ref: string, team: string | undefined): Promise<string | undefined> {
    const uploaders = this.contextUploaders.get(ref);
    if (uploaders === undefined) return 'is not a stored build context';
    return team === undefined || uploaders.has(team)
      ? undefined
      : `is not a build context team ${team} uploaded`;
  }
}

/** A one-task GPU job, as the client tests submit and show it. */
export const RESNET_SPEC: JobSpec = {
  name: 'resnet',
  team: 'vision',
  tasks: [
    {
      name: 'trainer',
      image: 'r:1',
      env: {},
      demand: { any: [1, 4, 24] },
      replicas: 1,
      shmSizeGiB: 1,
      workload: 'resnet',
    },
  ],
  checkpoint: { signal: 'SIGTERM', timeoutSeconds: 60 },
  totalIterations: 1000,
  queue: {},
};

export const ADMIN_TOKEN = 'admin-token-0123456789abcdef';
export const VISION_TOKEN = 'vision-token-0123456789abcdef';
export const NLP_TOKEN = 'nlp-token-0123456789abcdef00';

/** A fake with tokens for teams `vision` and `nlp`. */
export function fakeWithTeams(): FakeControllerService {
  const service = new FakeControllerService();
  service.store.addTeamToken('vision', VISION_TOKEN, 'test');
  service.store.addTeamToken('nlp', NLP_TOKEN, 'test');
  return service;
}

export const WORKER_BOOTSTRAP_TOKEN = 'worker-bootstrap-token-0123456789';
export const WORKER_INSTANCE_TOKEN = 'worker-instance-token-0123456789ab';

/** The worker protocol's endpoint for API tests: one instance, no tasks; records what it was sent. */
export class FakeWorkerEndpoint implements WorkerEndpoint {
  readonly registrations: RegisterRequest[] = [];
  readonly heartbeats: HeartbeatRequest[] = [];

  register(bootstrapToken: string, request: RegisterRequest): Promise<RegisterResponse> {
    if (bootstrapToken !== WORKER_BOOTSTRAP_TOKEN)
      return Promise.reject(new WorkerProtocolError(401, 'invalid worker token'));
    this.registrations.push(request);
    return Promise.resolve({
      instanceId: 'inst-1',
      workerToken: WORKER_INSTANCE_TOKEN,
      heartbeatSeconds: 5,
      objectStore: '/tmp/objects',
    });
  }

  heartbeat(instanceToken: string, request: HeartbeatRequest): HeartbeatResponse {
    if (instanceToken !== WORKER_INSTANCE_TOKEN)
      throw new WorkerProtocolError(401, 'unknown worker token: register again');
    this.heartbeats.push(request);
    return { tasks: [] };
  }
}
