import type {
  CloudInstance,
  CloudProvider,
  LaunchRequest,
  LaunchResult,
  ListOptions,
} from '../../cloud/provider.js';
import type { Market } from '../../core/market.js';

/** What the fence asks of the lease: throw unless this controller surely leads (LeaderElector.assertLeading). */
export interface LeadershipCheck {
  assertLeading(): void;
}

/**
 * The cloud behind the lease: every call first checks that this controller still holds the lease with its term and
 * enough of it left (LeaseNotHeldError otherwise, which the reconciler treats as a failed call and retries), so a
 * controller whose lease passed to another makes no cloud call. The cloud cannot check a fencing token itself, so a
 * call that passed the check just before a stall can still land after a takeover; the launch's idempotency token
 * (the new controller launches with the same one) and idempotent terminations make such a late call harmless.
 */
export class FencedCloudProvider implements CloudProvider {
  readonly isCapacityConstrained?: (typeName: string, market?: Market) => boolean;
  readonly markOfferingUnavailable?: (
    typeName: string,
    zone: string,
    market: Market,
    sinceSeconds?: number,
  ) => void;
  readonly unavailableOfferingSeconds?: number | undefined;
  readonly deletePlacementGroups?: (clusterName: string, keep: ReadonlySet<string>) => Promise<string[]>;
  readonly vanishedReason?: string | undefined;

  constructor(
    private readonly inner: CloudProvider,
    private readonly lease: LeadershipCheck,
  ) {
    // A cache lookup, not a cloud call: nothing to fence.
    if (inner.isCapacityConstrained !== undefined)
      this.isCapacityConstrained = (typeName, market) =>
        inner.isCapacityConstrained?.(typeName, market) ?? false;
    if (inner.markOfferingUnavailable !== undefined)
      this.markOfferingUnavailable = (typeName, zone, market, sinceSeconds) =>
        inner.markOfferingUnavailable?.(typeName, zone, market, sinceSeconds);
    this.unavailableOfferingSeconds = inner.unavailableOfferingSeconds;
    this.vanishedReason = inner.vanishedReason;
    // A cloud call like the others: fenced. Left out, a shared state's controllers never deleted a placement group.
    const deleteGroups = inner.deletePlacementGroups?.bind(inner);
    if (deleteGroups !== undefined)
      this.deletePlacementGroups = async (clusterName, keep) => {
        this.lease.assertLeading();
        return deleteGroups(clusterName, keep);
      };
  }

  async launch(request: LaunchRequest): Promise<LaunchResult> {
    this.lease.assertLeading();
    return this.inner.launch(request);
  }

  async terminate(instanceIds: readonly string[]): Promise<void> {
    this.lease.assertLeading();
    return this.inner.terminate(instanceIds);
  }

  async list(clusterName: string, options?: ListOptions): Promise<CloudInstance[]> {
    this.lease.assertLeading();
    return this.inner.list(clusterName, options);
  }
}
