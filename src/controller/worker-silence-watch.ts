import type { Attention } from './attention-clock.js';
import { CarriedSilence, CARRY_SILENCE_EVERY_SECONDS } from './carried-silence.js';
import type { ControllerLogger } from './seams.js';
import type { InstanceRecord, StateStore } from './state-store.js';
import { WorkerSilence } from './worker-silence.js';

/**
 * The registered workers watched for silence: when each was heard (worker-silence.ts), the silence saved for the next
 * controller while the worker protocol is served (carried-silence.ts), and which workers are silent for too long.
 */
export class WorkerSilenceWatch {
  private readonly silence: WorkerSilence;
  private readonly carried: CarriedSilence;
  private carryTimer: ReturnType<typeof setInterval> | undefined;
  private carryFailure: string | undefined;

  constructor(
    private readonly store: StateStore,
    /** The clock silence is measured on (attention-clock.ts). */
    attention: Attention,
    heartbeatSeconds: number,
    /** A registered worker silent for this long is lost. */
    heartbeatTimeoutSeconds: number,
    private readonly log: ControllerLogger,
  ) {
    // A worker heard at its interval is never silent for two of them (a late beat is not silence worth saving).
    this.carried = new CarriedSilence(this.store, 2 * heartbeatSeconds);
    this.silence = new WorkerSilence(attention, heartbeatTimeoutSeconds, this.carried.loaded);
  }

  /** The instance's worker registered (again). */
  registered(instanceId: string): void {
    this.silence.registered(instanceId);
  }

  /** The instance's worker heartbeated. */
  heard(instanceId: string): void {
    this.silence.heard(instanceId);
  }

  isLost(instanceId: string): boolean {
    return this.silence.isLost(instanceId);
  }

  /**
   * The worker protocol is served from now on (the API listens): silence counts from here (worker-silence.ts), and is
   * saved for the next controller from now on (carried-silence.ts) until `close()`.
   */
  serving(): void {
    this.silence.serving();
    this.carryTimer ??= setInterval(() => this.carrySilence(), CARRY_SILENCE_EVERY_SECONDS * 1000);
    this.carryTimer.unref();
  }

  /** Stop saving the workers' silence (the controller stops). */
  close(): void {
    if (this.carryTimer !== undefined) clearInterval(this.carryTimer);
    this.carryTimer = undefined;
  }

  /** Save each registered worker's silence so far, for a controller that starts after this one (worker-silence.ts). */
  carrySilence(): void {
    try {
      const silence = new Map<string, number>();
      for (const inst of this.watchedWorkers()) silence.set(inst.id, this.silence.silenceToCarry(inst.id));
      this.carried.save(silence);
      this.carryFailure = undefined;
    } catch (e) {
      // The next save tries again; a failure is logged once, not twice a second.
      const message = (e as Error).message;
      if (message !== this.carryFailure) this.log.warn(`saving the workers' silence failed: ${message}`);
      this.carryFailure = message;
    }
  }

  /** Registered workers silent for too long (worker-silence.ts); the caller replaces their instances. */
  staleInstances(): InstanceRecord[] {
    return this.watchedWorkers().filter((inst) => this.silence.isSilent(inst.id));
  }

  /** The instances whose registered worker is watched for silence (not lost yet), the fleet's size noted. */
  private watchedWorkers(): InstanceRecord[] {
    const watched = this.store
      .listInstances({ states: ['running', 'draining'] })
      .filter((inst) => inst.workerTokenHash !== undefined && !this.silence.isLost(inst.id));
    this.silence.observeFleet(watched.map((inst) => inst.id));
    return watched;
  }

  /** The caller replaced the instance: its worker is lost until it registers again. */
  markLost(instanceId: string): void {
    this.silence.markLost(instanceId);
  }

  /** Seconds since the instance's worker was last heard (undefined: never, in this process). */
  secondsSince(instanceId: string): number | undefined {
    return this.silence.secondsSince(instanceId);
  }
}
