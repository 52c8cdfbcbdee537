import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateQueueCommand, GetQueueAttributesCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, expect, it } from 'vitest';
import { createEc2Client, ec2ApiFromClient } from '../../src/cloud/aws/ec2-api.js';
import { Ec2Provider } from '../../src/cloud/aws/ec2-provider.js';
import { createSqsClient, SqsInterruptionQueue } from '../../src/cloud/aws/interruption-queue.js';
import { ManualClock } from '../../src/controller/clock.js';
import { Controller } from '../../src/controller/controller.js';
import { InterruptionListener } from '../../src/controller/interruption-listener.js';
import { SqliteStateStore } from '../../src/controller/state/sqlite-state-store.js';
import { openObjectStore } from '../../src/storage/open-object-store.js';
import { describeWithMoto } from '../helpers/moto.js';
import { BASE_SETTINGS, catalog, CPU_SMALL, jobSpec } from './controller-fixtures.js';

/**
 * The interruption queue against moto_server (EC2 and SQS): EventBridge's spot interruption warning for one of the
 * cluster's instances, put on the queue as EventBridge puts it, drains that instance and the next round plans its job
 * on a new one; every message is acknowledged (the acted-on one, one for an instance not in the cluster, another
 * kind of event, a malformed one, which is logged naming its field).
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-interruption-queue-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function eventBridge(
  detailType: string,
  detail: Record<string, unknown>,
  time = '2026-11-24T13:00:00Z',
): string {
  return JSON.stringify({
    version: '0',
    id: '1e5527d7-bb36-4607-3370-4164db56a40e',
    'detail-type': detailType,
    source: 'aws.ec2',
    account: '123456789012',
    time,
    region: 'us-east-1',
    resources: [],
    detail,
  });
}

describeWithMoto('the interruption queue (moto: EC2 and SQS)', (moto) => {
  it('a spot interruption warning drains the instance and the job moves; every message is acknowledged', async () => {
    const sqs = createSqsClient(moto.clientOptions);
    const queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'fleetwise-interruptions' })))
      .QueueUrl as string;
    const clock = new ManualClock();
    const provider = new Ec2Provider(
      {
        region: 'us-east-1',
        amiId: 'ami-12c6146b',
        placements: ['us-east-1a', 'us-east-1b'].map((availabilityZone) => ({ availabilityZone })),
        throttling: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1 },
      },
      { api: ec2ApiFromClient(createEc2Client(moto.clientOptions)), sleep: async () => {} },
    );
    const store = new SqliteStateStore(join(scratch, 'state.db'), {
      nowSeconds: () => clock.nowSeconds(),
      synchronous: 'normal',
    });
    const controllerWarnings: string[] = [];
    const controller = new Controller({
      store,
      catalog,
      provider,
      clock,
      objectStore: await openObjectStore(join(scratch, 'objects')),
      settings: { ...BASE_SETTINGS, clusterName: 'spot-queue' },
      logger: { info() {}, warn: (m) => controllerWarnings.push(m), error() {} },
    });
    const job = controller.submit(jobSpec('small', CPU_SMALL), 'research');
    await controller.recover();
    await controller.runRound('submitted');
    const [first] = await provider.list('spot-queue');
    expect(first).toBeDefined();
    const record = store.findInstanceByCloudId(first?.instanceId ?? '');
    expect(record?.state).toBe('running');

    const send = (body: string): Promise<unknown> =>
      sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body }));
    await send(
      eventBridge('EC2 Spot Instance Interruption Warning', {
        'instance-id': first?.instanceId,
        'instance-action': 'terminate',
      }),
    );
    await send(
      eventBridge('EC2 Spot Instance Interruption Warning', {
        'instance-id': 'i-0123456789abcdef0',
        'instance-action': 'terminate',
      }),
    );
    await send(
      eventBridge('EC2 Instance State-change Notification', {
        'instance-id': first?.instanceId,
        state: 'running',
      }),
    );
    await send(eventBridge('EC2 Spot Instance Interruption Warning', { 'instance-id': 'not-an-id' }));
    await send(
      eventBridge('EC2 Instance Rebalance Recommendation', { 'instance-id': 'i-0fedcba9876543210' }),
    );

    const warnings: string[] = [];
    const listener = new InterruptionListener({
      source: new SqsInterruptionQueue({ ...moto.clientOptions, queueUrl, waitSeconds: 1 }),
      handle: (cloudId, report) => controller.interruptionFromQueue(cloudId, report),
      log: { info() {}, warn: (m) => warnings.push(m), error() {} },
    });
    let acted = 0;
    for (let i = 0; i < 5 && acted === 0; i++) acted += await listener.pollOnce();
    expect(acted).toBe(1);
    for (let i = 0; i < 3; i++) await listener.pollOnce(); // whatever a receive left for the next
    const left = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    expect(left.Attributes?.ApproximateNumberOfMessages).toBe('0');
    expect(left.Attributes?.ApproximateNumberOfMessagesNotVisible).toBe('0');
    expect(warnings.some((w) => /detail\.instance-id: an EC2 instance id/.test(w))).toBe(true);
    // The queue is the cluster's own: a warning for an instance it never had is said, then deleted.
    expect(controllerWarnings).toContain(
      'interruption queue: rebalance-recommendation for i-0fedcba9876543210 ignored: not an instance of this ' +
        "cluster (is the queue's EventBridge rule shared with another cluster?)",
    );

    // Drained at once, with the time EC2 acts (two minutes after the warning).
    const drained = store.getInstance(record?.id ?? '');
    expect(drained?.state).toBe('draining');
    const events = store.listEvents({ kind: 'instance.spot-interruption', instanceId: record?.id ?? '' });
    expect(events.map((e) => e.message)).toEqual([
      expect.stringMatching(/receives a spot interruption at 2026-11-24T13:02:00\.000Z; draining it/),
    ]);
    // The offering is avoided: a spot launch of the type asking for the interrupted zone goes to the other one.
    const spot = await provider.launch({
      typeName: first?.typeName ?? '',
      idempotencyToken: 'probe-spot',
      clusterName: 'spot-queue-probe',
      planId: 'probe',
      instanceKey: 'probe',
      market: 'spot',
      availabilityZones: [first?.availabilityZone ?? ''],
    });
    expect(spot.market).toBe('spot');
    expect(spot.availabilityZone).not.toBe(first?.availabilityZone);
    // Delivered again (a queue may): nothing changes.
    expect(controller.interruptionFromQueue(first?.instanceId ?? '', { kind: 'spot-interruption' })).toBe(
      false,
    );

    // The round moves the job to a new instance and the interrupted one is terminated once empty.
    clock.advance(5);
    await controller.runRound('spot interruption');
    await controller.reconcile();
    clock.advance(5);
    await controller.runRound('period');
    await controller.reconcile();
    const live = await provider.list('spot-queue');
    expect(live.map((i) => i.instanceId)).not.toContain(first?.instanceId);
    expect(live).toHaveLength(1);
    const tasks = store.listTasks({ jobId: job.id });
    expect(
      tasks.every((t) => t.instanceId === store.findInstanceByCloudId(live[0]?.instanceId ?? '')?.id),
    ).toBe(true);
    store.close();
  });

  it('one message that cannot be handled holds back none of its batch; only a failed handling is redelivered', async () => {
    const sqs = createSqsClient(moto.clientOptions);
    // No visibility timeout: a message left on the queue is visible again at the next receive.
    const queueUrl = (
      await sqs.send(
        new CreateQueueCommand({ QueueName: 'fleetwise-poison', Attributes: { VisibilityTimeout: '0' } }),
      )
    ).QueueUrl as string;
    const warning = (id: string, time?: string): string =>
      eventBridge(
        'EC2 Spot Instance Interruption Warning',
        { 'instance-id': id, 'instance-action': 'terminate' },
        time,
      );
    const send = (body: string): Promise<unknown> =>
      sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body }));
    // A time a Date holds but not two minutes later, and one that is no date at all.
    await send(warning('i-0000000000000000a', '+275760-09-13T00:00:00.000Z'));
    await send(warning('i-0000000000000000c', '2026-02-30T99:00:00Z'));
    await send(warning('i-00000000000000001'));
    await send(warning('i-00000000000000002'));
    await send(warning('i-00000000000000003'));

    const handled: string[] = [];
    const warnings: string[] = [];
    let storeDown = true;
    const listener = new InterruptionListener({
      source: new SqsInterruptionQueue({ ...moto.clientOptions, queueUrl, waitSeconds: 1 }),
      handle: (cloudId, report) => {
        // The store fails for one message until it recovers.
        if (cloudId === 'i-00000000000000002' && storeDown) throw new Error('database is locked');
        handled.push(`${cloudId} ${report.time ?? ''}`);
        return true;
      },
      log: { info() {}, warn: (m) => warnings.push(m), error() {} },
    });
    let acted = 0;
    for (let i = 0; i < 6 && acted < 2; i++) acted += await listener.pollOnce();
    expect(handled.sort()).toEqual([
      'i-00000000000000001 2026-11-24T13:02:00.000Z',
      'i-00000000000000003 2026-11-24T13:02:00.000Z',
    ]);
    // Both bad times are logged, naming the field, and deleted like any malformed message.
    expect(warnings.filter((w) => /ignored: time: an ISO 8601 date-time/.test(w))).toHaveLength(1);
    expect(warnings.filter((w) => /ignored: time: a real date between 2000 and 2200/.test(w))).toHaveLength(
      1,
    );
    expect(
      warnings.some((w) => /i-00000000000000002\) left for redelivery: .*database is locked/.test(w)),
    ).toBe(true);
    // Only the message whose handling failed is still there; once the store is back it is handled and deleted.
    storeDown = false;
    for (let i = 0; i < 6 && acted < 3; i++) acted += await listener.pollOnce();
    expect(handled).toContain('i-00000000000000002 2026-11-24T13:02:00.000Z');
    const left = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    expect(left.Attributes?.ApproximateNumberOfMessages).toBe('0');
    expect(left.Attributes?.ApproximateNumberOfMessagesNotVisible).toBe('0');
    expect(handled).toHaveLength(3);
  });

  it('a receipt the queue refuses to delete is reported, not thrown', async () => {
    const sqs = createSqsClient(moto.clientOptions);
    const queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'fleetwise-acks' })))
      .QueueUrl as string;
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: '{}' }));
    const source = new SqsInterruptionQueue({ ...moto.clientOptions, queueUrl, waitSeconds: 1 });
    let received = await source.receive();
    for (let i = 0; i < 3 && received.length === 0; i++) received = await source.receive();
    const good = received[0]?.receipt ?? '';
    const failed = await source.acknowledge([good, 'not-a-receipt-handle']);
    expect(failed).toEqual([
      {
        receipt: 'not-a-receipt-handle',
        reason: expect.stringMatching(/^ReceiptHandleIsInvalid: /) as string,
      },
    ]);
    source.close();
  });
});
