import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { parseInterruptionMessage } from '../../src/cloud/interruption-events.js';
import { noticeTimeMs, noticeTimeSchema } from '../../src/protocol/notice-time.js';
import {
  ADMIN_TOKEN,
  fakeWithTeams,
  FakeWorkerEndpoint,
  WORKER_INSTANCE_TOKEN,
} from '../controller/api-fake-service.js';

/**
 * One check for an interruption notice's time, whichever way the notice comes: the metadata service's reply, a
 * worker's heartbeat, an EventBridge event on the interruption queue.
 */
describe('a notice time', () => {
  const problem = (text: string): string | undefined => {
    const parsed = noticeTimeSchema.safeParse(text);
    return parsed.success ? undefined : parsed.error.issues.map((i) => i.message).join('; ');
  };

  it('is an ISO 8601 date-time that exists, with or without fractional seconds or an offset', () => {
    expect(problem('2026-11-24T13:00:00Z')).toBeUndefined();
    expect(noticeTimeMs('2026-11-24T13:00:00Z')).toBe(Date.UTC(2026, 10, 24, 13, 0, 0));
    expect(noticeTimeMs('2026-11-24T13:00:00.250Z')).toBe(Date.UTC(2026, 10, 24, 13, 0, 0, 250));
    expect(noticeTimeMs('2026-11-24T14:00:00+01:00')).toBe(Date.UTC(2026, 10, 24, 13, 0, 0));
    expect(noticeTimeMs('2028-02-29T00:00:00Z')).toBe(Date.UTC(2028, 1, 29));
  });

  it.each<[string, string, RegExp]>([
    ['a word', 'soon', /an ISO 8601 date-time/],
    ['a date without a time', '2026-11-24', /an ISO 8601 date-time/],
    ['an epoch number', '1795000000', /an ISO 8601 date-time/],
    // Date.parse reads it as March 2: a reclaim two days off.
    ['a day February does not have', '2026-02-30T10:00:00Z', /2026-02-30T10:00:00 is not on the calendar/],
    ['February 29 of a common year', '2027-02-29T10:00:00Z', /not on the calendar/],
    ['an hour past the day', '2026-11-24T24:00:00Z', /not on the calendar/],
    ['a year before 2000', '1970-01-01T00:00:00Z', /a real date between 2000 and 2200/],
    ['a year after 2200', '2300-01-01T00:00:00Z', /a real date between 2000 and 2200/],
  ])('refuses %s', (_label, text, reason) => {
    expect(problem(text)).toMatch(reason);
    expect(noticeTimeMs(text)).toBeUndefined();
  });

  it('is checked on the interruption queue as on the other paths', () => {
    const event = (time: string): string =>
      JSON.stringify({
        source: 'aws.ec2',
        'detail-type': 'EC2 Spot Instance Interruption Warning',
        time,
        detail: { 'instance-id': 'i-0123456789abcdef0', 'instance-action': 'terminate' },
      });
    expect(parseInterruptionMessage(event('2026-11-24T13:00:00Z')).event?.time).toBe('2026-11-24T13:00:00Z');
    expect(parseInterruptionMessage(event('2026-02-30T10:00:00Z')).problem).toMatch(
      /^time: a date and time that exist/,
    );
  });
});

describe('a heartbeat whose interruption notice has a time that is none', () => {
  let server: ApiServer;
  let workers: FakeWorkerEndpoint;

  beforeAll(async () => {
    workers = new FakeWorkerEndpoint();
    server = await startApiServer(fakeWithTeams(), {
      listen: '127.0.0.1:0',
      adminToken: ADMIN_TOKEN,
      workers,
    });
  });
  afterAll(async () => {
    await server.close();
  });

  const beat = async (time: string): Promise<{ status: number; text: string }> => {
    const response = await fetch(`${server.url}/v1/workers/heartbeat`, {
      method: 'POST',
      headers: { authorization: `Bearer ${WORKER_INSTANCE_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        tasks: [{ taskId: 'job-1.0', state: 'running' }],
        interruption: { kind: 'spot-interruption', action: 'terminate', time },
      }),
    });
    return { status: response.status, text: await response.text() };
  };

  it('is answered 400 naming the field, and reaches the controller not at all', async () => {
    const before = workers.heartbeats.length;
    for (const time of ['soon', '2026-02-30T10:00:00Z']) {
      const answer = await beat(time);
      expect(answer.status).toBe(400);
      expect(answer.text).toMatch(/interruption\.time: /);
    }
    expect(workers.heartbeats).toHaveLength(before);
    // The same heartbeat with a time that exists is taken, its notice with it.
    const good = await beat('2026-11-24T13:02:00.000Z');
    expect(good.status).toBe(200);
    expect(workers.heartbeats.at(-1)?.interruption).toEqual({
      kind: 'spot-interruption',
      action: 'terminate',
      time: '2026-11-24T13:02:00.000Z',
    });
  });
});
