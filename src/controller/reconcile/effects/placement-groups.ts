import { InjectedCrash } from '../../faults.js';
import { LIVE_INSTANCE_STATES, type ReconcileContext } from '../context.js';

/** At most this often: a DescribePlacementGroups call per pass would be waste, a leftover group costs nothing. */
export const PLACEMENT_GROUP_CLEANUP_SECONDS = 300;

/**
 * Deletes the cluster's placement groups that no live instance is in or is to be launched into (best effort: the
 * cloud refuses to delete a group that still counts instances, and the next cleanup tries again). The first pass after
 * a start cleans up after a controller that died with empty groups left.
 */
export class PlacementGroupCleanup {
  private lastAtSeconds: number | undefined;

  constructor(private readonly ctx: ReconcileContext) {}

  async perform(): Promise<string[]> {
    const ctx = this.ctx;
    if (ctx.dryRun || ctx.provider.deletePlacementGroups === undefined) return [];
    const now = ctx.now();
    if (this.lastAtSeconds !== undefined && now - this.lastAtSeconds < PLACEMENT_GROUP_CLEANUP_SECONDS)
      return [];
    this.lastAtSeconds = now;
    const keep = new Set<string>();
    for (const inst of ctx.store.listInstances({ states: [...LIVE_INSTANCE_STATES] }))
      if (inst.placementGroup !== undefined) keep.add(inst.placementGroup);
    try {
      const deleted = await ctx.provider.deletePlacementGroups(ctx.settings.clusterName, keep);
      if (deleted.length > 0) {
        ctx.store.appendEvent({
          kind: 'cluster.placement-groups-deleted',
          message: `deleted placement group(s) no instance uses: ${deleted.join(', ')}`,
          data: { deleted },
        });
        ctx.log.info('deleted unused placement groups', { deleted });
      }
      return deleted;
    } catch (e) {
      if (e instanceof InjectedCrash) throw e;
      ctx.log.warn('deleting unused placement groups failed; trying again later', {
        error: e instanceof Error ? e.message : String(e),
      });
      return [];
    }
  }
}
