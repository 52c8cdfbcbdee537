import { TAG_LAUNCH_TOKEN } from '../cloud/provider.js';
import { launchSecretFor } from '../protocol/launch-secret.js';
import {
  heartbeatResponseSchema,
  registerResponseSchema,
  WORKER_ROUTES,
  type DesiredTask,
  type TaskReport,
} from '../protocol/worker-protocol.js';

/**
 * Workers simulated over the real worker protocol (src/protocol/worker-protocol.ts), for the controller benchmark:
 * each registers for one of the controller's local instances with its launch's one-time secret (derived from the
 * cluster's worker token, as the local provider hands it to the workers it spawns), then heartbeats on its
 * own timer with what it "runs". A task it is asked to run is reported running at once, with progress (ten iterations
 * a second) and, after `taskSeconds`, succeeded; one asked to stop is reported stopped. Nothing runs: the controller does all its real work (API,
 * authentication, the store, reconciliation), the workers only answer as workers would.
 */

export interface FleetOptions {
  readonly url: string;
  /** The cluster's worker token (the local provider's). */
  readonly workerToken: string;
  /** The controller's instances as its provider lists them: whom to register as. */
  readonly instances: () => readonly {
    readonly instanceId: string;
    readonly state: string;
    readonly tags?: Readonly<Record<string, string>>;
  }[];
  /** Milliseconds between a worker's heartbeats. */
  readonly heartbeatMs: number;
  /** Seconds a task runs before it succeeds (Infinity: until stopped). */
  readonly taskSeconds: number;
}

interface SimTask {
  state: TaskReport['state'];
  sinceMs: number;
  readonly attempt: number;
}

class SimulatedWorker {
  token: string | undefined;
  timer: NodeJS.Timeout | undefined;
  /**
   * Bumped by each heartbeat scheduled: a beat still in flight when a newer one was scheduled (the period changed, the
   * worker registered again) must not schedule another, or the worker would beat on two timers at once.
   */
  generation = 0;
  readonly tasks = new Map<string, SimTask>();
  failures = 0;

  constructor(
    readonly cloudId: string,
    /** The launch's one-time secret: it registers the instance once. */
    readonly launchSecret: string,
  ) {}

  /** What this worker reports now, finishing the tasks that have run long enough. */
  reports(nowMs: number, taskSeconds: number): TaskReport[] {
    const out: TaskReport[] = [];
    for (const [taskId, task] of this.tasks) {
      if (task.state === 'running' && nowMs - task.sinceMs >= taskSeconds * 1000) task.state = 'succeeded';
      out.push({
        taskId,
        state: task.state,
        attempt: task.attempt,
        // Progress as a task's progress file gives it: ten iterations a second.
        completedIterations: Math.floor((nowMs - task.sinceMs) / 100),
        ...(task.state === 'succeeded' ? { exitCode: 0 } : {}),
      });
    }
    return out;
  }

  /** Take the controller's answer: run what it wants run, stop what it wants stopped, forget what it let go. */
  apply(desired: readonly DesiredTask[], nowMs: number): void {
    const wanted = new Map(desired.map((d) => [d.taskId, d]));
    for (const [taskId, task] of this.tasks) {
      const d = wanted.get(taskId);
      if (d === undefined) {
        if (task.state === 'running') task.state = 'stopped';
        else this.tasks.delete(taskId);
      } else if (d.action !== 'run' && task.state === 'running') task.state = 'stopped';
    }
    for (const d of desired) {
      if (d.action !== 'run') continue;
      const task = this.tasks.get(d.taskId);
      // A held start (co-start) is prepared at once and waits, reported ready, for the answer without the hold.
      if (task === undefined)
        this.tasks.set(d.taskId, {
          state: d.hold === true ? 'ready' : 'running',
          sinceMs: nowMs,
          attempt: d.attempt ?? 1,
        });
      else if (task.state === 'ready' && d.hold !== true) {
        task.state = 'running';
        task.sinceMs = nowMs;
      }
    }
  }
}

export class SimulatedFleet {
  private readonly workers = new Map<string, SimulatedWorker>();
  private discovery: NodeJS.Timeout | undefined;
  private running = false;
  private recording: number[] | undefined;
  heartbeatMs: number;
  taskSeconds: number;
  /** Requests that failed (network errors, non-2xx answers other than a worker being told to register again). */
  errors = 0;

  constructor(private readonly options: FleetOptions) {
    this.heartbeatMs = options.heartbeatMs;
    this.taskSeconds = options.taskSeconds;
  }

  /** Register for every instance the provider lists (now and as they come), and heartbeat. */
  start(): void {
    this.running = true;
    const discover = (): void => {
      if (!this.running) return;
      for (const inst of this.options.instances())
        if (inst.state === 'running' && !this.workers.has(inst.instanceId)) {
          const worker = new SimulatedWorker(
            inst.instanceId,
            launchSecretFor(this.options.workerToken, inst.tags?.[TAG_LAUNCH_TOKEN] ?? inst.instanceId),
          );
          this.workers.set(inst.instanceId, worker);
          void this.register(worker);
        }
      this.discovery = setTimeout(discover, 250);
    };
    discover();
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.discovery !== undefined) clearTimeout(this.discovery);
    for (const w of this.workers.values()) if (w.timer !== undefined) clearTimeout(w.timer);
  }

  /** Workers registered with the controller. */
  get registered(): number {
    return [...this.workers.values()].filter((w) => w.token !== undefined).length;
  }

  /** Tasks the fleet reports running. */
  get runningTasks(): number {
    let n = 0;
    for (const w of this.workers.values())
      for (const t of w.tasks.values()) if (t.state === 'running') n += 1;
    return n;
  }

  /** Heartbeat every `ms` from now on, each worker at a random offset (so they do not beat in step). */
  setHeartbeatMs(ms: number): void {
    this.heartbeatMs = ms;
    for (const w of this.workers.values()) {
      if (w.token === undefined) continue;
      this.schedule(w, Math.random() * ms);
    }
  }

  /** Start keeping each heartbeat's latency (ms); `stopRecording` returns them. */
  startRecording(): void {
    this.recording = [];
  }

  stopRecording(): number[] {
    const out = [...(this.recording ?? [])];
    this.recording = undefined;
    return out;
  }

  private async register(worker: SimulatedWorker): Promise<void> {
    if (!this.running) return;
    try {
      const response = await fetch(`${this.options.url}${WORKER_ROUTES.register}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${worker.launchSecret}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({
          instanceId: worker.cloudId,
          executor: 'process',
          identity: { kind: 'launch-secret' },
        }),
      });
      const body: unknown = await response.json();
      if (response.status === 200) {
        worker.token = registerResponseSchema.parse(body).workerToken;
        this.schedule(worker, Math.random() * this.heartbeatMs);
        return;
      }
      // 409: the launch is being recorded; anything else is counted and retried the same way.
      if (response.status !== 409) this.errors += 1;
    } catch {
      this.errors += 1;
    }
    worker.timer = setTimeout(() => void this.register(worker), 500);
  }

  private schedule(worker: SimulatedWorker, delayMs: number): void {
    if (!this.running) return;
    if (worker.timer !== undefined) clearTimeout(worker.timer);
    worker.generation += 1;
    const generation = worker.generation;
    worker.timer = setTimeout(() => void this.heartbeat(worker, generation), delayMs);
  }

  private async heartbeat(worker: SimulatedWorker, generation: number): Promise<void> {
    if (!this.running || worker.token === undefined || generation !== worker.generation) return;
    const started = performance.now();
    const recording = this.recording;
    try {
      const response = await fetch(`${this.options.url}${WORKER_ROUTES.heartbeat}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${worker.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ tasks: worker.reports(Date.now(), this.taskSeconds) }),
      });
      const body: unknown = await response.json();
      if (response.status === 200) {
        worker.apply(heartbeatResponseSchema.parse(body).tasks, Date.now());
        recording?.push(performance.now() - started);
      } else if (response.status === 401 || response.status === 410) {
        // Told to register again (or the instance is gone): as a worker does.
        worker.token = undefined;
        worker.tasks.clear();
        if (response.status === 401) return void this.register(worker);
        return;
      } else this.errors += 1;
    } catch {
      this.errors += 1;
    }
    // Superseded while in flight: the newer heartbeat keeps the worker's one timer going.
    if (generation !== worker.generation) return;
    this.schedule(worker, Math.max(0, this.heartbeatMs - (performance.now() - started)));
  }
}
