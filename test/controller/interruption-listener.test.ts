import { describe, expect, it } from 'vitest';
import {
  parseInterruptionMessage,
  type AcknowledgeFailure,
  type InterruptionEventSource,
  type ReceivedInterruption,
} from '../../src/cloud/interruption-events.js';
import { InterruptionListener } from '../../src/controller/interruption-listener.js';

/** The listener's own decisions, on a source scripted per receive (the queue itself: interruption-queue-moto). */

function body(time: string): string {
  return JSON.stringify({
    'detail-type': 'EC2 Spot Instance Interruption Warning',
    source: 'aws.ec2',
    time,
    detail: { 'instance-id': 'i-0123456789abcdef0', 'instance-action': 'terminate' },
  });
}

describe('interruption event times', () => {
  it('a time outside real dates is refused naming the field; a real one passes as given', () => {
    expect(parseInterruptionMessage(body('+275760-09-13T00:00:00.000Z')).problem).toMatch(
      /^time: an ISO 8601 date-time/,
    );
    expect(parseInterruptionMessage(body('9999-12-31T23:59:00Z')).problem).toBe(
      'time: a real date between 2000 and 2200',
    );
    expect(parseInterruptionMessage(body('2026-11-24T25:00:00Z')).problem).toBe(
      'time: a real date between 2000 and 2200',
    );
    // Date.parse would read these as March 2, May 1 and the next day's midnight.
    for (const t of ['2026-02-30T13:00:00Z', '2026-04-31T13:00:00+14:00', '2026-11-24T24:00:00Z'])
      expect(parseInterruptionMessage(body(t)).problem).toBe(
        `time: a date and time that exist (${t.slice(0, 19)} is not on the calendar)`,
      );
    expect(parseInterruptionMessage(body('2028-02-29T13:00:00Z')).event?.time).toBe('2028-02-29T13:00:00Z');
    expect(parseInterruptionMessage(body('2026-11-24T13:00:00.123+01:00')).event?.time).toBe(
      '2026-11-24T13:00:00.123+01:00',
    );
  });
});

describe('the interruption listener', () => {
  it('backs off exponentially up to its cap while receives fail, logs each error once, and resets on success', async () => {
    // Receives: three failures, a success, two failures of another kind, then stop.
    const script: (Error | undefined)[] = [
      new Error('queue gone'),
      new Error('queue gone'),
      new Error('queue gone'),
      undefined,
      new Error('access denied'),
      new Error('access denied'),
    ];
    const sleeps: number[] = [];
    const warnings: string[] = [];
    const infos: string[] = [];
    let calls = 0;
    let finish: () => void = () => {};
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const source: InterruptionEventSource = {
      receive: () => {
        const step = script[calls++];
        if (calls >= script.length) void listener.stop().then(finish);
        return step === undefined ? Promise.resolve([]) : Promise.reject(step);
      },
      acknowledge: () => Promise.resolve([]),
    };
    const listener = new InterruptionListener({
      source,
      handle: () => true,
      log: { info: (m) => infos.push(m), warn: (m) => warnings.push(m), error() {} },
      retrySeconds: 20,
      maxRetrySeconds: 60,
      sleep: (ms) => {
        sleeps.push(ms);
        return Promise.resolve();
      },
    });
    listener.start();
    await finished;
    expect(calls).toBe(script.length);
    expect(sleeps).toEqual([20_000, 40_000, 60_000, 20_000]);
    expect(warnings).toEqual(['interruption queue: queue gone', 'interruption queue: access denied']);
    expect(infos).toEqual(['interruption queue: receiving again']);
    // Every wait is the fake one: a loop that slept for real would take minutes.
  }, 5000);

  it('reports the messages the queue did not delete, and deletes only what it handled or could not use', async () => {
    const messages: ReceivedInterruption[] = [
      { messageId: 'm1', receipt: 'r1', problem: 'time: a real date between 2000 and 2200' },
      {
        messageId: 'm2',
        receipt: 'r2',
        event: {
          kind: 'spot-interruption',
          cloudInstanceId: 'i-00000000000000002',
          time: '2026-11-24T13:00:00Z',
        },
      },
      {
        messageId: 'm3',
        receipt: 'r3',
        event: {
          kind: 'rebalance-recommendation',
          cloudInstanceId: 'i-00000000000000003',
          time: '2026-11-24T13:00:00Z',
        },
      },
      { messageId: 'm4', receipt: 'r4' },
    ];
    const acknowledged: string[][] = [];
    const warnings: string[] = [];
    const listener = new InterruptionListener({
      source: {
        receive: () => Promise.resolve(messages),
        acknowledge: (receipts): Promise<readonly AcknowledgeFailure[]> => {
          acknowledged.push([...receipts]);
          return Promise.resolve([{ receipt: 'r4', reason: 'ReceiptHandleIsInvalid: expired' }]);
        },
      },
      handle: (id) => {
        if (id === 'i-00000000000000003') throw new Error('database is locked');
        return true;
      },
      log: { info() {}, warn: (m) => warnings.push(m), error() {} },
    });
    expect(await listener.pollOnce()).toBe(1);
    expect(acknowledged).toEqual([['r1', 'r2', 'r4']]);
    expect(warnings).toEqual([
      'interruption queue: message m1 ignored: time: a real date between 2000 and 2200',
      'interruption queue: message m3 (rebalance-recommendation for i-00000000000000003) left for redelivery: ' +
        'handling it failed: database is locked',
      'interruption queue: message m4 not deleted (ReceiptHandleIsInvalid: expired); it comes back and is handled ' +
        'again, which changes nothing',
    ]);
  });

  it('deletes events that are not interruptions, saying so once per kind so a wrong rule shows in the log', async () => {
    const other = (source: string, detailType: string): string =>
      JSON.stringify({ 'detail-type': detailType, source, time: '2026-11-24T13:00:00Z', detail: {} });
    const bodies = [
      other('aws.ec2', 'EC2 Instance State-change Notification'),
      other('aws.health', 'AWS Health Event'),
      other('aws.ec2', 'EC2 Instance State-change Notification'),
    ];
    const messages: ReceivedInterruption[] = bodies.map((b, i) => ({
      messageId: `m${i}`,
      receipt: `r${i}`,
      ...parseInterruptionMessage(b),
    }));
    const acknowledged: string[] = [];
    const infos: string[] = [];
    const listener = new InterruptionListener({
      source: {
        receive: () => Promise.resolve(messages),
        acknowledge: (receipts): Promise<readonly AcknowledgeFailure[]> => {
          acknowledged.push(...receipts);
          return Promise.resolve([]);
        },
      },
      handle: () => true,
      log: { info: (m) => infos.push(m), warn() {}, error() {} },
    });
    expect(await listener.pollOnce()).toBe(0);
    expect(await listener.pollOnce()).toBe(0);
    expect(acknowledged).toEqual(['r0', 'r1', 'r2', 'r0', 'r1', 'r2']);
    expect(infos).toEqual([
      'interruption queue: deleting "EC2 Instance State-change Notification" from aws.ec2 events (message m0 the ' +
        'first): not an interruption warning or rebalance recommendation',
      'interruption queue: deleting "AWS Health Event" from aws.health events (message m1 the first): not an ' +
        'interruption warning or rebalance recommendation',
    ]);
  });
});
