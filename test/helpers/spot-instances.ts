import type { SchedInstance } from '../../src/core/model.js';

/** A running spot c7i.xlarge in us-east-1a holding `taskIds`, flagged by EC2 for rebalancing unless `flagged` is false. */
export function spotInstance(id: string, taskIds: readonly string[], flagged = true): SchedInstance {
  return {
    id,
    typeName: 'c7i.xlarge',
    state: 'running',
    taskIds: [...taskIds],
    market: 'spot',
    placement: { zone: 'us-east-1a' },
    ...(flagged ? { rebalanceRecommended: true } : {}),
  };
}
