import { afterAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { ManualClock } from '../../src/controller/clock.js';
import { LoopMonitor } from '../../src/controller/loop-health.js';
import { FakeControllerService } from './api-fake-service.js';

/**
 * The loop's health as /healthz reports it: a pass running too long is stuck; passes that all fail for as long leave
 * the loop as idle, and are reported failing with the last error; a pass that succeeds ends either.
 */
describe('loop health', () => {
  const servers: ApiServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.close();
  });

  const failingPass = (message: string) => (): Promise<never> => Promise.reject(new Error(message));

  it('says failing once every pass has failed for longer than the threshold, naming the last error', async () => {
    const clock = new ManualClock();
    const monitor = new LoopMonitor(clock, 60);
    await expect(monitor.track('reconcile', failingPass('task job-1.0 cannot go'))).rejects.toThrow();
    clock.advance(30);
    await expect(monitor.track('reconcile', failingPass('task job-1.0 cannot go, again'))).rejects.toThrow();
    // 30 s of failures: a blip, still ok.
    expect(monitor.health().status).toBe('ok');
    clock.advance(31);
    await expect(monitor.track('round', failingPass('still'))).rejects.toThrow();
    const health = monitor.health();
    expect(health.status).toBe('failing');
    expect(health.reason).toMatch(
      /^every pass of the control loop has failed for 61 s \(more than 60 s\).*the last: still$/,
    );
    // One pass that succeeds ends it.
    await monitor.track('reconcile', () => Promise.resolve());
    expect(monitor.health().status).toBe('ok');
  });

  it('answers /healthz 503 with status failing while the loop fails', async () => {
    const clock = new ManualClock();
    const monitor = new LoopMonitor(clock, 60);
    const service = new FakeControllerService();
    Object.assign(service, { loopHealth: () => monitor.health() });
    const server = await startApiServer(service, {
      listen: '127.0.0.1:0',
      adminToken: 'loop-health-admin-0123456789',
    });
    servers.push(server);
    await expect(monitor.track('reconcile', failingPass('the store refused it'))).rejects.toThrow();
    clock.advance(90);
    const answer = await fetch(`${server.url}/healthz`);
    expect(answer.status).toBe(503);
    const body = (await answer.json()) as { status: string; error: string };
    expect(body.status).toBe('failing');
    expect(body.error).toContain('the last: the store refused it');
  });
});
