import type { InstanceType } from '../../../core/catalog.js';
import type { FamilyDemand } from '../../../core/resources.js';
import { MARKETS, type Market } from '../../../core/market.js';
import type { NoCapacityOffering } from '../../../core/model.js';
import { offeringsOf, spotOffering, UNAVAILABLE_OFFERING_SECONDS } from '../../../core/spot.js';
import { hasAnyCap, type BoughtType } from '../../../queue/caps.js';
import { launchGate, type GateWait } from '../../../round/gates.js';
import { chooseReplacementType, hosts } from '../../../round/replacement.js';
import {
  CloudProviderError,
  InsufficientCapacityError,
  QuotaExceededError,
  type CloudInstance,
} from '../../../cloud/provider.js';
import { launchRefusalKind, launchRetryDelaySeconds } from '../../../cloud/launch-refusal-kinds.js';
import { loseInstance } from '../cloud-sync.js';
import { InjectedCrash } from '../../faults.js';
import { PLACED_TASK_STATES } from '../../state/lifecycle.js';
import {
  launchIntentKey,
  type InstanceRecord,
  type IntentPayload,
  type IntentRecord,
  type TaskRecord,
} from '../../state-store.js';
import { LIVE_INSTANCE_STATES, type ReconcileContext } from '../context.js';
import { releaseTasksOn } from '../jobs.js';
import { launchedOnSpot, recordMarketFallback } from '../../instance-market.js';
import { clearLaunchError, readLaunchError, recordLaunchError } from '../../launch-error-records.js';
import { readNoCapacity, recordNoCapacity } from '../../no-capacity-records.js';
import { launchBackoff } from './registrations.js';
import { INSTANCE_LIMIT_CODE, QuotaRefusals, type QuotaRefusal } from './quota-refusals.js';

/**
 * Launches: a pending `launch` intent → CloudProvider.launch with the instance's stored idempotency token, once the
 * launch gate and any backoff allow. No capacity or a quota falls back to another type; other errors retry later,
 * kept with the instance until it launches (launch-error-records.ts).
 * A spot launch may be bought on demand by the cloud only when the caps allow the on-demand price too.
 */
export class Launches {
  /** Launch intents that failed (not for capacity or a quota): attempts and when to try again (in memory). */
  private readonly launchRetry = new Map<number, { attempts: number; notBeforeSeconds: number }>();
  /** Recent quota refusals, so the fallback and later launches skip the types they rule out (quota-refusals.ts). */
  private readonly quotaRefusals: QuotaRefusals;

  constructor(private readonly ctx: ReconcileContext) {
    this.quotaRefusals = new QuotaRefusals(
      (name) => ctx.typeOf(name),
      () => ctx.now(),
    );
  }

  async perform(): Promise<{ launched: string[]; deferred: number }> {
    const launched: string[] = [];
    let deferred = 0;
    const backoff = launchBackoff(this.ctx);
    // The fleet in transit, read once per pass and kept up to date with this pass's launches: only this pass launches,
    // and reading every live instance again for each launch made a pass over n launches O(n²).
    let inTransit: BoughtType[] | undefined;
    const capped = hasAnyCap(this.ctx.settings.caps);
    for (let intent of this.ctx.store.listIntents({ states: ['pending'], kind: 'launch' })) {
      // Each capacity fallback records a new intent for a new instance; follow the chain within this pass.
      for (;;) {
        if (intent.kind !== 'launch') break;
        if (this.ctx.now() < backoff.notBeforeSeconds) {
          deferred += 1;
          break;
        }
        const retry = this.launchRetry.get(intent.id);
        if (retry !== undefined && this.ctx.now() < retry.notBeforeSeconds) {
          deferred += 1;
          break;
        }
        inTransit ??= this.fleetInTransit();
        if (this.launchWait(intent, inTransit) !== undefined) {
          deferred += 1; // the fleet in transit must shrink first (round/gates.ts `launchGate`)
          break;
        }
        const outcome = await this.launchOne(intent, inTransit);
        if (outcome.kind === 'launched') {
          launched.push(outcome.instanceId);
          // Read only when a cap needs the fleet in transit (uncapped, it stays empty).
          const record = capped ? this.ctx.store.getInstance(outcome.instanceId) : undefined;
          const bought = record === undefined ? undefined : this.boughtOf(record);
          if (bought !== undefined) inTransit.push(bought);
        }
        if (outcome.kind !== 'fallback') break;
        intent = outcome.next;
      }
    }
    return { launched, deferred };
  }

  private async launchOne(
    intent: IntentRecord & { kind: 'launch' },
    inTransit: readonly BoughtType[],
  ): Promise<
    | { kind: 'launched'; instanceId: string }
    | { kind: 'fallback'; next: IntentRecord }
    | { kind: 'skipped' | 'failed' }
  > {
    const payload: IntentPayload<'launch'> = intent.payload;
    const inst = this.ctx.store.getInstance(payload.instanceId);
    if (inst === undefined || inst.state !== 'requested' || inst.cloudId !== undefined) {
      // Launched already (adopted by the sync), or dropped before its launch.
      this.ctx.store.transaction(() => {
        if (inst?.cloudId !== undefined) this.ctx.store.completeIntent(intent.id);
        else
          this.ctx.store.failIntent(
            intent.id,
            `instance ${payload.instanceId} is ${inst?.state ?? 'unknown'}`,
          );
        clearLaunchError(this.ctx.store, payload.instanceId);
      });
      return { kind: 'skipped' };
    }
    const remembered = this.knownQuotaRefusal(inst.typeName, intent);
    if (remembered !== undefined)
      return this.fallBack(
        intent,
        inst,
        new CloudProviderError(
          remembered.code === INSTANCE_LIMIT_CODE
            ? `launching ${inst.typeName} would exceed its instance-count limit: it was refused ` +
                `(${remembered.code}) ${this.ctx.now() - remembered.atSeconds} s ago`
            : `launching ${inst.typeName} would exceed an account quota: ${remembered.typeName} was refused ` +
                `(${remembered.code}) ${this.ctx.now() - remembered.atSeconds} s ago and ${inst.typeName} needs as ` +
                `many vCPUs or more`,
          remembered.code,
        ),
      );
    this.ctx.fault('launch:before-call', inst.id);
    let result;
    try {
      result = await this.ctx.provider.launch({
        typeName: inst.typeName,
        idempotencyToken: payload.launchToken,
        clusterName: this.ctx.settings.clusterName,
        planId: `round-${intent.round ?? 0}`,
        instanceKey: inst.id,
        availabilityZones: inst.availabilityZone === undefined ? [] : [inst.availabilityZone],
        ...(inst.placementGroup === undefined ? {} : { placementGroup: inst.placementGroup }),
        market: payload.market ?? 'on-demand',
        onDemandFallback: this.onDemandFallbackAllowed(intent, inTransit),
        ...this.spotZonesAllowed(intent, inTransit),
        tags: { ...(this.ctx.settings.tags ?? {}) },
      });
    } catch (e) {
      if (e instanceof InjectedCrash) throw e;
      if (e instanceof QuotaExceededError) this.quotaRefusals.remember(e);
      if (e instanceof InsufficientCapacityError || e instanceof QuotaExceededError)
        return this.fallBack(intent, inst, e);
      this.deferLaunch(intent, inst, e);
      return { kind: 'failed' };
    }
    this.ctx.fault('launch:after-call', inst.id);
    const cloudId = result.instanceIds[0] as string;
    if (result.instanceIds.length > 1)
      this.ctx.log.warn('a launch token matched several instances; the others are handled as orphans', {
        instanceId: inst.id,
        cloudIds: [...result.instanceIds],
      });
    const found = result.reusedExisting ? await this.foundByToken(result.instanceIds) : undefined;
    const first = found?.get(cloudId);
    const launchedAtSeconds = first?.launchTime === undefined ? undefined : first.launchTime.getTime() / 1000;
    // Every instance an earlier attempt launched has ended (reclaimed, or terminated while the controller was down):
    // the record is lost now, its tasks planned again, rather than waiting out the vanish grace as if just launched.
    // Nothing is launched for it: a new record with a new token does that, so no retry can launch twice.
    const ended =
      found !== undefined &&
      result.instanceIds.every((id) => {
        const state = found.get(id)?.state;
        return state === 'terminated' || state === 'shutting-down';
      });
    const lostReason = ended
      ? `its instance ${cloudId}, launched by an earlier attempt and found by launch token, is ${first?.state ?? 'gone'}`
      : undefined;
    this.ctx.store.transaction(() => {
      const current = this.ctx.store.getInstance(inst.id) as InstanceRecord;
      const change = {
        cloudId,
        availabilityZone: result.availabilityZone,
        // What the cloud really gave: the scheduler's latency domains come from this, not from the request.
        placementGroup: result.placementGroup ?? null,
        reason: result.reusedExisting ? 'found by launch token' : `launched (round ${intent.round ?? 0})`,
        launchedAtSeconds,
      };
      this.ctx.store.setInstanceState(
        inst.id,
        current.state === 'requested' ? 'launching' : current.state,
        change,
      );
      if (
        lostReason === undefined &&
        inst.placementGroup !== undefined &&
        result.placementGroup !== inst.placementGroup
      )
        this.ctx.store.appendEvent({
          kind: 'instance.placement-fallback',
          instanceId: inst.id,
          message: `launched without placement group ${inst.placementGroup}${result.placementFallback === undefined ? '' : `: ${result.placementFallback}`}`,
          data: {
            asked: inst.placementGroup,
            ...(result.availabilityZone === undefined ? {} : { zone: result.availabilityZone }),
            ...(result.placementFallback === undefined ? {} : { why: result.placementFallback }),
          },
        });
      // Whatever the reason (no spot capacity, a provider without a spot market, or the instance an earlier attempt
      // launched and this one found by its token), a spot launch that got on-demand capacity is recorded as such.
      if (payload.market === 'spot' && result.market !== 'spot')
        recordMarketFallback(
          this.ctx.store,
          inst.id,
          result.marketFallback ??
            (result.reusedExisting
              ? 'the instance an earlier attempt launched runs on demand'
              : 'the cloud has no spot market'),
        );
      this.ctx.store.completeIntent(intent.id);
      // In the same commit: one sync of the store per launch, not three.
      this.ctx.store.deleteValue(refusedKey(inst.id));
      clearLaunchError(this.ctx.store, inst.id);
    });
    this.launchRetry.delete(intent.id);
    if (lostReason !== undefined) {
      // Lost as the cloud sync loses an instance it finds ended (its tasks released, a spot reclaim billed so), now.
      const recorded = this.ctx.store.getInstance(inst.id) as InstanceRecord;
      const endedAt = first?.endedAt === undefined ? undefined : first.endedAt.getTime() / 1000;
      loseInstance(this.ctx, recorded, lostReason, endedAt, false, first?.endedBySpotInterruption);
      return { kind: 'failed' };
    }
    this.ctx.log.info(`launched ${inst.typeName} for ${inst.id}`, { cloudId, reused: result.reusedExisting });
    return { kind: 'launched', instanceId: inst.id };
  }

  /**
   * The instances an earlier attempt launched, as the cloud lists them now (terminated ones too): when each was
   * launched (billed since then, not since this attempt found it) and whether it still runs. Undefined when the
   * listing fails: the instance then counts from now, and the cloud sync learns its state.
   */
  private async foundByToken(cloudIds: readonly string[]): Promise<Map<string, CloudInstance> | undefined> {
    try {
      const listed = await this.ctx.provider.list(this.ctx.settings.clusterName, { includeTerminated: true });
      const wanted = new Set(cloudIds);
      return new Map(listed.filter((c) => wanted.has(c.instanceId)).map((c) => [c.instanceId, c]));
    } catch (e) {
      if (e instanceof InjectedCrash) throw e;
      this.ctx.log.warn(
        'could not list instances to learn when a reused launch was launched; billing it from now',
        { cloudIds: [...cloudIds], error: (e as Error).message },
      );
      return undefined;
    }
  }

  /**
   * Throttling, a refusal or another API error: keep the intent pending and try again later, at a backoff doubling from
   * the base, or at the longest at once for a refusal only an operator can lift (cloud/launch-refusal-kinds.ts). The
   * error is kept with the instance for the views; a restarted controller tries at once and counts on from it.
   */
  private deferLaunch(intent: IntentRecord, inst: InstanceRecord, error: unknown): void {
    const attempts =
      (this.launchRetry.get(intent.id)?.attempts ?? readLaunchError(this.ctx.store, inst.id)?.attempts ?? 0) +
      1;
    const kind = launchRefusalKind(error);
    const { launchRetryBaseSeconds: base = 10, launchRetryMaxSeconds: max = 300 } = this.ctx.settings;
    const delay = launchRetryDelaySeconds(attempts, kind, base, max);
    const now = this.ctx.now();
    this.launchRetry.set(intent.id, { attempts, notBeforeSeconds: now + delay });
    const message = error instanceof Error ? error.message : String(error);
    const code = error instanceof CloudProviderError ? error.code : undefined;
    const permanent = kind === 'permanent';
    recordLaunchError(this.ctx.store, inst, {
      message,
      ...(code === undefined ? {} : { code }),
      attempts,
      atSeconds: now,
      nextAttemptAtSeconds: now + delay,
      permanent,
    });
    if (permanent)
      this.ctx.log.error(
        `launch of ${inst.id} refused (${code ?? 'refused'}): it fails until its cause is fixed; retrying in ${delay} s`,
        { error: message, attempts },
      );
    else this.ctx.log.warn(`launch of ${inst.id} failed; retrying in ${delay} s`, { error: message });
  }

  /** The tasks an instance is to host: committed there, or waiting to start there. */
  private plannedTasksOf(instanceId: string): TaskRecord[] {
    const ids = new Set<string>();
    for (const t of this.ctx.store.listTasks({ instanceId }))
      if (PLACED_TASK_STATES.includes(t.state)) ids.add(t.id);
    for (const i of this.ctx.store.listIntents({ states: ['pending'], kind: 'start-task' }))
      if (i.kind === 'start-task' && i.payload.instanceId === instanceId) ids.add(i.payload.taskId);
    return [...ids].map((id) => this.ctx.store.getTask(id)).filter((t): t is TaskRecord => t !== undefined);
  }

  /**
   * No capacity for the type (in any zone the provider tried) or a quota: launch the next-cheapest type that holds
   * the instance's planned tasks instead (industry-anchors.md §(c) 6; Karpenter falls back across offerings), keeping
   * the $/hour cap. The old record is closed and a new one (new token) takes over its tasks; without any fitting
   * type, the tasks return to the queue. No round is asked for then: planned at once, they would be refused the same
   * way, round after round. The refusal is recorded (no-capacity-records.ts), so the rounds that come (the period's,
   * or one asked for by something else) keep the jobs no type with capacity can host waiting until the provider's
   * window ends (round/capacity-holds.ts), and the window's end brings a round (round-schedule.ts).
   */
  private fallBack(
    intent: IntentRecord & { kind: 'launch' },
    inst: InstanceRecord,
    error: CloudProviderError,
  ): { kind: 'fallback'; next: IntentRecord } | { kind: 'failed' } {
    const tasks = this.plannedTasksOf(inst.id);
    const demands = tasks.map((t) => this.ctx.demandOf(t));
    const refused = new Set([inst.typeName, ...this.refusedTypesOf(inst.id)]);
    const inTransit = this.fleetInTransit();
    const replacement = chooseReplacementType({
      typesByCost: this.ctx.book.byCostAscending,
      demands,
      refused,
      capacityConstrained: (typeName) =>
        this.capacityConstrained(typeName, intent, inTransit) ||
        this.knownQuotaRefusal(typeName, intent) !== undefined,
      launchGate: (type) => this.launchWait(intent, inTransit, type.name),
    });
    const reason = `${error.message}`;
    const noCapacity = this.noCapacityOf(inst.typeName, intent.payload.market ?? 'on-demand', demands, error);
    if (replacement === undefined) {
      this.ctx.store.transaction(() => {
        this.ctx.store.failIntent(intent.id, reason);
        this.ctx.store.setInstanceState(inst.id, 'terminated', {
          reason: `${reason}; no other type fits its tasks`,
        });
        recordNoCapacity(this.ctx.store, noCapacity, this.ctx.now());
        releaseTasksOn(this.ctx, inst.id, this.waitReason(inst.typeName, error));
        clearLaunchError(this.ctx.store, inst.id);
      });
      this.ctx.log.warn(`no capacity for ${inst.typeName} and no fitting alternative; its tasks wait`, {
        instanceId: inst.id,
      });
      return { kind: 'failed' };
    }
    const spot =
      intent.payload.market === 'spot' && this.hasSpotPool(replacement.name, inst.availabilityZone);
    const next = this.ctx.store.transaction(() => {
      // The replacement keeps the place its tasks were planned in (zone, placement group) and how the plan buys it:
      // a spot launch of the new type falls back to on demand by itself when spot has no room either (where the caps
      // allow its on-demand price). A type with no spot pool there is bought on demand: no spot price is known for it.
      const created = this.ctx.store.createInstance({
        typeName: replacement.name,
        availabilityZone: inst.availabilityZone,
        placementGroup: inst.placementGroup,
      });
      this.ctx.store.failIntent(intent.id, `${reason}; replaced by ${created.id} (${replacement.name})`);
      this.ctx.store.setInstanceState(inst.id, 'terminated', {
        reason: `${reason}; replaced by ${created.id} (${replacement.name})`,
      });
      const launch = this.ctx.store.recordIntent(
        {
          kind: 'launch',
          payload: {
            instanceId: created.id,
            typeName: created.typeName,
            launchToken: created.launchToken,
            ...(spot ? { market: 'spot' as const } : {}),
          },
        },
        { key: launchIntentKey(created.id), ...(intent.round === undefined ? {} : { round: intent.round }) },
      );
      for (const pending of this.ctx.store.listIntents({ states: ['pending'], kind: 'start-task' })) {
        if (pending.kind !== 'start-task' || pending.payload.instanceId !== inst.id) continue;
        this.ctx.store.failIntent(pending.id, `moved to ${created.id}`);
        this.ctx.store.recordIntent(
          { kind: 'start-task', payload: { taskId: pending.payload.taskId, instanceId: created.id } },
          intent.round === undefined ? {} : { round: intent.round },
        );
      }
      for (const task of this.ctx.store.listTasks({ instanceId: inst.id }))
        if (task.state === 'starting') this.ctx.store.setTaskState(task.id, 'starting', created.id);
      this.ctx.store.setValue(refusedKey(created.id), [...refused]);
      recordNoCapacity(this.ctx.store, noCapacity, this.ctx.now());
      clearLaunchError(this.ctx.store, inst.id);
      this.ctx.store.appendEvent({
        kind: 'instance.fallback',
        instanceId: created.id,
        message: `${inst.typeName} refused (${error.code ?? 'capacity'}); launching ${replacement.name} for ${tasks.length} task(s) instead`,
        data: { from: inst.id, fromType: inst.typeName, toType: replacement.name, refused: [...refused] },
      });
      return launch;
    });
    this.ctx.store.deleteValue(refusedKey(inst.id));
    this.ctx.log.warn(`no capacity for ${inst.typeName}; trying ${replacement.name}`, {
      from: inst.id,
      to: next.payload.instanceId,
    });
    return { kind: 'fallback', next };
  }

  /**
   * The offerings out of reach after a capacity refusal of `typeName`, bought in `market`: the refused type in that
   * market (a spot launch is refused only once every zone the plan could buy it in on spot refused it), and, as the
   * provider's cache holds them now, every market in which it or another type that fits the same tasks has no
   * capacity in any zone (the fallback passed those over without asking the cloud). The refused type's window ends the
   * cache's window from now; a type passed over keeps the end recorded when it was refused, or gets the same when none
   * was (it was refused earlier, so its window ends no later). None for a quota refusal, or from a provider that keeps
   * no such cache (each launch asks its cloud again).
   */
  private noCapacityOf(
    typeName: string,
    market: Market,
    demands: readonly FamilyDemand[],
    error: CloudProviderError,
  ): NoCapacityOffering[] {
    const provider = this.ctx.deps.provider;
    if (!(error instanceof InsufficientCapacityError) || provider?.isCapacityConstrained === undefined)
      return [];
    const now = this.ctx.now();
    const untilSeconds = now + (provider.unavailableOfferingSeconds ?? UNAVAILABLE_OFFERING_SECONDS);
    const known = new Set(readNoCapacity(this.ctx.store, now).map((o) => `${o.typeName}/${o.market}`));
    const fitting = this.ctx.book.byCostAscending.filter((t) => t.name === typeName || hosts(t, demands));
    return fitting.flatMap((type) =>
      MARKETS.filter((m) =>
        type.name === typeName
          ? m === market || provider.isCapacityConstrained?.(type.name, m) === true
          : provider.isCapacityConstrained?.(type.name, m) === true && !known.has(`${type.name}/${m}`),
      ).map((m) => ({ typeName: type.name, market: m, untilSeconds })),
    );
  }

  /** Why the tasks of an instance no type can replace wait again (the job's reason, as `fleetwise job` shows it). */
  private waitReason(typeName: string, error: CloudProviderError): string {
    const refused = `${typeName} was refused (${error.code ?? 'no capacity'})`;
    return error instanceof InsufficientCapacityError
      ? `no capacity: ${refused} and no other instance type that fits its tasks can be launched now; it waits ` +
          `until the cloud may have capacity again`
      : `${refused} and no other instance type that fits its tasks can be launched now`;
  }

  /**
   * Whether a spot launch of `typeName` has a pool to go to where the instance goes: its planned zone, else any zone
   * of the catalog (the controller's holds only the pools of the cluster's zones). Without a spot catalog there is
   * nothing to judge by, and the launch keeps the market it asked for (as `spotZonesAllowed` leaves it unlimited).
   */
  private hasSpotPool(typeName: string, zone: string | undefined): boolean {
    const spot = this.ctx.catalog.spot;
    if (spot === undefined) return true;
    return zone === undefined
      ? offeringsOf(spot, typeName).length > 0
      : spotOffering(spot, typeName, zone) !== undefined;
  }

  /**
   * The launch gate for one more instance of `typeName` (default: the intent's), bought as the intent asks (spot at
   * its zone's pool's price): every instance launched and not yet terminated counts against the caps until it is gone
   * (round/gates.ts `launchGate`, as in the simulated world). Nothing is read when no cap is set.
   */
  private launchWait(
    intent: IntentRecord & { kind: 'launch' },
    inTransit: readonly BoughtType[],
    typeName: string = intent.payload.typeName,
  ): GateWait {
    const caps = this.ctx.settings.caps;
    if (!hasAnyCap(caps)) return undefined;
    const type = this.ctx.typeOf(typeName);
    if (type === undefined) return undefined; // the provider refuses an unknown type itself
    const zone = this.ctx.store.getInstance(intent.payload.instanceId)?.availabilityZone;
    return launchGate(this.bought(type, intent.payload.market === 'spot', zone), inTransit, caps);
  }

  /**
   * Whether the cloud may buy a spot launch on demand when it has no spot capacity: only when the launch gate passes
   * with the type at its on-demand price too. The gate let the launch through at the spot pool's price; bought on
   * demand unchecked, it could put the fleet over the $/hour cap, and every later plan keeping the instance would be
   * refused. Refused, the launch is a capacity error: another type, or the tasks back to the next round.
   */
  private onDemandFallbackAllowed(
    intent: IntentRecord & { kind: 'launch' },
    inTransit: readonly BoughtType[],
  ): boolean {
    const caps = this.ctx.settings.caps;
    if (intent.payload.market !== 'spot' || !hasAnyCap(caps)) return true;
    const type = this.ctx.typeOf(intent.payload.typeName);
    return type === undefined || launchGate(type, inTransit, caps) === undefined;
  }

  /**
   * The zones a spot launch may go to: those where the catalog has a spot pool of the type, capped or not. An instance
   * EC2 grants in a zone without a pool has no spot price the controller knows, so caps, costs and plans would take it
   * for on demand (instance-market.ts); the provider intersects these with its subnets' zones. Capped, also only the
   * pools that keep the fleet within the caps: the gate let the launch through at its planned pool's price, but the
   * cloud tries other zones' pools when that one has no room, and a dearer one could break the cap (a type that fits
   * at its on-demand price fits in every pool: EC2's default maximum spot price, no pool costs more). No limit for an
   * on-demand launch, nor without a spot catalog (nothing to limit it to).
   */
  private spotZonesAllowed(
    intent: IntentRecord & { kind: 'launch' },
    inTransit: readonly BoughtType[],
  ): { spotZones?: string[] } {
    if (intent.payload.market !== 'spot') return {};
    const type = this.ctx.typeOf(intent.payload.typeName);
    const spot = this.ctx.catalog.spot;
    if (type === undefined || spot === undefined) return {};
    const pools = offeringsOf(spot, type.name);
    const caps = this.ctx.settings.caps;
    const limited =
      !hasAnyCap(caps) || launchGate(type, inTransit, caps) === undefined
        ? pools
        : pools.filter((o) => launchGate(this.bought(type, true, o.zone), inTransit, caps) === undefined);
    return { spotZones: limited.map((o) => o.zone) };
  }

  /**
   * Whether the provider's recent capacity errors rule `typeName` out for this launch, in the market it would be
   * bought in: spot, then on demand when the caps allow it; on demand for an on-demand launch.
   */
  private capacityConstrained(
    typeName: string,
    intent: IntentRecord & { kind: 'launch' },
    inTransit: readonly BoughtType[],
  ): boolean {
    const provider = this.ctx.deps.provider;
    if (provider?.isCapacityConstrained === undefined) return false;
    if (intent.payload.market !== 'spot') return provider.isCapacityConstrained(typeName, 'on-demand');
    if (!provider.isCapacityConstrained(typeName, 'spot')) return false;
    const caps = this.ctx.settings.caps;
    const type = this.ctx.typeOf(typeName);
    const onDemandAllowed =
      !hasAnyCap(caps) || type === undefined || launchGate(type, inTransit, caps) === undefined;
    return !onDemandAllowed || provider.isCapacityConstrained(typeName, 'on-demand');
  }

  /**
   * The remembered quota refusal a launch of `typeName` for this intent would meet again: in its market; for a spot
   * launch also the on-demand one when spot has no room for the type (the provider then buys it on demand). A spot
   * quota refusal is not retried on demand by the provider, so it rules the type out by itself.
   */
  private knownQuotaRefusal(
    typeName: string,
    intent: IntentRecord & { kind: 'launch' },
  ): QuotaRefusal | undefined {
    if (intent.payload.market !== 'spot') return this.quotaRefusals.refused(typeName, 'on-demand');
    const spot = this.quotaRefusals.refused(typeName, 'spot');
    if (spot !== undefined) return spot;
    return this.ctx.deps.provider?.isCapacityConstrained?.(typeName, 'spot') === true
      ? this.quotaRefusals.refused(typeName, 'on-demand')
      : undefined;
  }

  /** The instances launched and not yet terminated, as bought (none read when no cap needs them). */
  private fleetInTransit(): BoughtType[] {
    if (!hasAnyCap(this.ctx.settings.caps)) return []; // nothing to keep: no need to read the fleet
    const inTransit: BoughtType[] = [];
    for (const i of this.ctx.store.listInstances({ states: [...LIVE_INSTANCE_STATES] })) {
      if (i.cloudId === undefined) continue; // not launched (yet, or ever)
      const bought = this.boughtOf(i);
      if (bought !== undefined) inTransit.push(bought);
    }
    return inTransit;
  }

  /**
   * A launched instance as the caps count it: on spot at its pool's price when its launch asked for spot and did not
   * fall back to on demand (as the snapshot reads its market), else at its type's on-demand price.
   */
  private boughtOf(inst: InstanceRecord): BoughtType | undefined {
    const type = this.ctx.typeOf(inst.typeName);
    if (type === undefined) return undefined;
    return this.bought(type, launchedOnSpot(this.ctx.store, inst.id), inst.availabilityZone);
  }

  /** `type` bought on spot (its pool's price, as the engine counts it: world/commands.ts) or on demand. */
  private bought(type: InstanceType, spot: boolean, zone: string | undefined): BoughtType {
    const pool = spot ? spotOffering(this.ctx.catalog.spot, type.name, zone) : undefined;
    return pool === undefined ? type : { ...type, costPerHour: pool.pricePerHour, market: 'spot' };
  }

  private refusedTypesOf(instanceId: string): string[] {
    const value = this.ctx.store.getValue(refusedKey(instanceId));
    return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
  }
}

function refusedKey(instanceId: string): string {
  return `controller.refusedTypes.${instanceId}`;
}
