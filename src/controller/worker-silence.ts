import type { Attention } from './attention-clock.js';

/**
 * How many heartbeat timeouts a worker gets to (re)connect: a restarted controller waits this long for a worker it has
 * not heard yet, and any controller for the first heartbeat of a worker that has just registered. Every worker
 * reconnects at once, on a new connection, to a process still warming up, and on a starved host that burst is
 * answered late: at one timeout, one restart on a loaded host replaced eleven healthy instances at once, each
 * replacement costing a launch and the work since the task's last checkpoint. A worker that has just registered is
 * still starting (its first heartbeat adopts what runs on its instance, and a dozen workers start at once when a
 * cluster fills): at one timeout (3 s) the chaos run replaced nine of its first twelve workers, each 3.1–3.8 s after it
 * registered. Kubernetes gives nodes that have not reported a longer grace the same way (node-startup grace period
 * against the node-monitor grace period).
 */
export const RECONNECT_GRACE_TIMEOUTS = 2;

/**
 * When a registered worker counts as silent (ARCHITECTURE.md "A silent worker"): measured on the controller's
 * attention clock, never before the controller serves the worker protocol, with RECONNECT_GRACE_TIMEOUTS timeouts for
 * a worker not heard since and for the first heartbeat after a registration, and one timeout after a heartbeat. A
 * worker marked lost stays lost until it registers again.
 *
 * A worker not heard since the restart also carries the silence earlier controllers counted against it
 * (`silenceToCarry`, saved by carried-silence.ts): a controller restarted again and again (a crash loop) would
 * otherwise start every count afresh and never replace a dead worker, whose task may then run to its end unseen and be
 * run again from its last checkpoint once the loop stops. A controller adds to that count only once it hears the
 * fleet: from when it has heard at least half of the other registered workers. A controller still taking the
 * reconnect burst hears healthy workers late, and one killed within seconds may never hear some of them: counted from
 * its start, a crash loop of lives of 0.3–3 s summed those misses past the grace and replaced healthy workers.
 */
export class WorkerSilence {
  /** Since when workers can reach this controller (serving()); undefined before. */
  private servingSinceSeconds: number | undefined;
  private readonly lastHeard = new Map<string, number>();
  /** Workers that registered with this controller and have not heartbeated since. */
  private readonly starting = new Set<string>();
  /** When each worker was first heard by this controller. */
  private readonly firstHeard = new Map<string, number>();
  /** When this controller had heard at least half of the other registered workers (observeFleet); undefined before. */
  private fleetHeardSeconds: number | undefined;
  private readonly lost = new Set<string>();
  /** Silence counted by earlier controllers, per worker not heard by this one yet. */
  private readonly carried: Map<string, number>;

  constructor(
    private readonly attention: Attention,
    private readonly timeoutSeconds: number,
    carried: Iterable<readonly [instanceId: string, seconds: number]> = [],
  ) {
    this.carried = new Map(carried);
  }

  /**
   * The worker protocol is served from now on (the API listens). A worker's silence counts from then at the earliest:
   * before, no worker could have been heard, however long the controller took to start (recovering a large state, a
   * loaded host), and counting that time against them replaced every healthy instance at once.
   */
  serving(): void {
    this.servingSinceSeconds ??= this.attention.seconds();
  }

  /** The instance's worker registered: heard now, no longer lost, and starting until its first heartbeat. */
  registered(instanceId: string): void {
    this.heard(instanceId);
    this.starting.add(instanceId);
    this.lost.delete(instanceId);
  }

  heard(instanceId: string): void {
    const now = this.attention.seconds();
    this.lastHeard.set(instanceId, now);
    if (!this.firstHeard.has(instanceId)) this.firstHeard.set(instanceId, now);
    this.carried.delete(instanceId);
    this.starting.delete(instanceId);
  }

  /**
   * Note the registered workers not marked lost, as the caller lists them: once this controller has heard at least
   * half of the others (half of all but one, rounded up), it hears the fleet, from the moment it had heard them; the
   * carried count goes on from there.
   */
  observeFleet(registered: readonly string[]): void {
    if (this.fleetHeardSeconds !== undefined || this.servingSinceSeconds === undefined) return;
    const needed = Math.ceil((registered.length - 1) / 2);
    if (needed <= 0) {
      this.fleetHeardSeconds = this.servingSinceSeconds;
      return;
    }
    const heardAt = registered
      .flatMap((id) => {
        const at = this.firstHeard.get(id);
        return at === undefined ? [] : [at];
      })
      .sort((a, b) => a - b);
    const at = heardAt[needed - 1];
    if (at !== undefined) this.fleetHeardSeconds = Math.max(at, this.servingSinceSeconds);
  }

  markLost(instanceId: string): void {
    this.lost.add(instanceId);
  }

  isLost(instanceId: string): boolean {
    return this.lost.has(instanceId);
  }

  /** Whether the instance's worker (registered, not yet lost) has been silent too long. */
  isSilent(instanceId: string): boolean {
    if (this.servingSinceSeconds === undefined || this.lost.has(instanceId)) return false;
    const now = this.attention.seconds();
    const last = this.lastHeard.get(instanceId);
    const grace = RECONNECT_GRACE_TIMEOUTS * this.timeoutSeconds;
    if (last !== undefined) return now - last > (this.starting.has(instanceId) ? grace : this.timeoutSeconds);
    return now - this.servingSinceSeconds > grace || this.countedSilence(instanceId, now) > grace;
  }

  /** A worker not heard by this controller: what earlier controllers counted, and this one since it hears the fleet. */
  private countedSilence(instanceId: string, now: number): number {
    const carried = this.carried.get(instanceId) ?? 0;
    return this.fleetHeardSeconds === undefined ? carried : carried + now - this.fleetHeardSeconds;
  }

  /** The silence the next controller should count on from, were this one to stop now. */
  silenceToCarry(instanceId: string): number {
    const now = this.attention.seconds();
    const last = this.lastHeard.get(instanceId);
    return last !== undefined ? now - last : this.countedSilence(instanceId, now);
  }

  /** Seconds since the instance's worker was last heard (undefined: never, in this process). */
  secondsSince(instanceId: string): number | undefined {
    const last = this.lastHeard.get(instanceId);
    return last === undefined ? undefined : this.attention.seconds() - last;
  }
}
