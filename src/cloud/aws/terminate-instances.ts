import { ValidationError } from '../../core/validation.js';
import { awsErrorCode } from './client-config.js';
import { INSTANCE_ID } from './describe-instances.js';
import { asProviderError, type Ec2Calls } from './ec2-calls.js';

/** TerminateInstances takes at most 1000 ids per call. */
const TERMINATE_BATCH = 1000;

/** Terminates the instances, in batches EC2 accepts; an id EC2 no longer knows is already gone, not an error. */
export async function terminateInstances(ec2: Ec2Calls, instanceIds: readonly string[]): Promise<void> {
  const ids = [...new Set(instanceIds)];
  const bad = ids.filter((id) => !INSTANCE_ID.test(id));
  if (bad.length > 0)
    throw new ValidationError(
      'terminate',
      bad.map((id) => `${JSON.stringify(id)}: not an EC2 instance id`),
    );
  for (let start = 0; start < ids.length; start += TERMINATE_BATCH) {
    const batch = ids.slice(start, start + TERMINATE_BATCH);
    try {
      await ec2.call('TerminateInstances', () => ec2.api.terminateInstances({ InstanceIds: batch }));
    } catch (e) {
      // One unknown id fails the whole call: retry one by one, ignoring ids that are already gone.
      if (awsErrorCode(e) !== 'InvalidInstanceID.NotFound') throw asProviderError(e, 'TerminateInstances');
      for (const id of batch) await terminateOneIgnoringMissing(ec2, id);
    }
  }
}

async function terminateOneIgnoringMissing(ec2: Ec2Calls, id: string): Promise<void> {
  try {
    await ec2.call('TerminateInstances', () => ec2.api.terminateInstances({ InstanceIds: [id] }));
  } catch (e) {
    if (awsErrorCode(e) !== 'InvalidInstanceID.NotFound')
      throw asProviderError(e, `TerminateInstances ${id}`);
  }
}
