import type { CloudInstance } from '../cloud/provider.js';
import type { Clock } from './clock.js';
import type { ControllerLogger } from './seams.js';

/**
 * Orphans the `keep` policy leaves running (reconcile/cloud-sync.ts): instances tagged with the cluster that the state
 * does not know, so whatever runs on them is not accounted for (a lost or emptied state file, another controller on
 * the same cluster name). Nothing touches them; they are reported until the operator acts: an error in the log when
 * first seen (and a line when one disappears), `fleetwise cluster`, and the `fleetwise_orphan_instances` metric.
 * Level-triggered: every comparison with the cloud replaces the list, so a restarted controller finds them again.
 */

export interface OrphanView {
  readonly cloudId: string;
  readonly typeName: string;
  /** The cloud's state (pending, running, stopped, …). */
  readonly state: string;
  readonly availabilityZone?: string | undefined;
  readonly launchedAtSeconds?: number | undefined;
  /** When this controller process first listed it. */
  readonly firstSeenAtSeconds: number;
  readonly policy: 'keep';
}

export class KeptOrphans {
  private current = new Map<string, OrphanView>();

  constructor(
    private readonly clock: Clock,
    private readonly log: ControllerLogger,
    private readonly clusterName: string,
  ) {}

  /** The orphans of the latest comparison with the cloud. */
  update(instances: readonly CloudInstance[]): void {
    const next = new Map<string, OrphanView>();
    for (const c of instances) {
      const known = this.current.get(c.instanceId);
      const view: OrphanView = {
        cloudId: c.instanceId,
        typeName: c.typeName,
        state: c.state,
        availabilityZone: c.availabilityZone,
        launchedAtSeconds: c.launchTime === undefined ? undefined : c.launchTime.getTime() / 1000,
        firstSeenAtSeconds: known?.firstSeenAtSeconds ?? this.clock.nowSeconds(),
        policy: 'keep',
      };
      next.set(c.instanceId, view);
      if (known === undefined)
        this.log.error(
          `orphan instance ${c.instanceId} (${c.typeName}, ${c.state}) is tagged with cluster ${this.clusterName} but ` +
            'unknown to the state: whatever runs on it is not accounted for, so it is kept running and not used ' +
            '(--orphans keep). Restore the state if it was lost; otherwise stop it yourself, or restart with ' +
            '--orphans adopt (the plan may use or terminate it) or --orphans terminate',
          { cloudId: c.instanceId, typeName: c.typeName, state: c.state },
        );
    }
    for (const [cloudId, view] of this.current)
      if (!next.has(cloudId))
        this.log.info(`orphan instance ${cloudId} (${view.typeName}) is no longer listed by the cloud`);
    this.current = next;
  }

  list(): OrphanView[] {
    return [...this.current.values()];
  }
}
