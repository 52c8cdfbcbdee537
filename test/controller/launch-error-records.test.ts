import { expect, it } from 'vitest';
import { CloudProviderError, type LaunchRequest, type LaunchResult } from '../../src/cloud/provider.js';
import { readLaunchError } from '../../src/controller/launch-error-records.js';
import { CPU_SMALL, FakeCloud, jobSpec, rig } from './controller-fixtures.js';

/** A cloud that refuses every launch for a security group that does not exist. */
class RefusingCloud extends FakeCloud {
  override async launch(_input: LaunchRequest): Promise<LaunchResult> {
    throw new CloudProviderError(
      'RunInstances failed: The security group sg-1 does not exist',
      'InvalidGroup.NotFound',
    );
  }
}

it('forgets an instance’s launch error once the instance is no longer to be launched (its job cancelled)', async () => {
  const r = rig({}, { cloud: new RefusingCloud() });
  const job = r.controller.submit(jobSpec('small', CPU_SMALL), 'research');
  await r.controller.recover();
  await r.controller.runRound('submitted');
  expect(readLaunchError(r.store, 'inst-1')).toMatchObject({
    code: 'InvalidGroup.NotFound',
    permanent: true,
  });
  r.controller.cancel(job.id);
  for (let i = 0; i < 3; i++) {
    r.clock.advance(30);
    await r.controller.runRound('after the cancel');
    await r.controller.reconcile();
  }
  expect(r.store.getInstance('inst-1')?.state).toBe('terminated');
  expect(readLaunchError(r.store, 'inst-1')).toBeUndefined();
});
