import { Command } from 'commander';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { registerWhy } from '../../src/cli/commands/why.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { ManualClock } from '../../src/controller/clock.js';
import { jobRestarts } from '../../src/controller/job-runs.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { TaskReport } from '../../src/protocol/worker-protocol.js';
import { catalog, CPU_SMALL, jobSpec, rig, workerTaskControlFor } from './controller-fixtures.js';

/**
 * `fleetwise why` and the job's restarts when its worker is lost: the job goes back to the queue before the next round,
 * which places it anew, so no round moves it; what ended its run is in its return to the queue. The real controller,
 * its worker protocol played by heartbeats (10 s timeout), its API on a socket and the CLI command in-process.
 */

const ADMIN = 'admin-token-why-restart-0123456789abcdef';
const servers: ApiServer[] = [];

afterAll(async () => {
  for (const s of servers) await s.close();
});

const token = (instanceId: string): string => `worker-token-${instanceId}-0123456789abcdef`;

async function whyCli(server: ApiServer, jobId: string): Promise<string> {
  const program = new Command('fleetwise').exitOverride();
  registerWhy(program);
  let stdout = '';
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  try {
    await program.parseAsync(['node', 'fleetwise', 'why', jobId, '--server', server.url, '--token', ADMIN]);
  } finally {
    spy.mockRestore();
  }
  return stdout;
}

describe('a job whose worker was lost', () => {
  it('why says the round that placed it again restarted it, and why; its restarts name the lost instance', async () => {
    const clock = new ManualClock();
    const store = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const workers = workerTaskControlFor(store, clock, { heartbeatTimeoutSeconds: 10 });
    const r = rig({}, { store, clock, tasks: workers, workers });
    workers.serving();
    const server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
    servers.push(server);

    const job = r.controller.submit(jobSpec('lost-worker', CPU_SMALL), 'research');
    const taskId = `${job.id}.0`;
    const running: TaskReport = { taskId, state: 'running', attempt: 1 };
    const runOn = async (instanceId: string): Promise<void> => {
      await r.controller.reconcile();
      store.setWorkerToken(instanceId, token(instanceId));
      await r.controller.reconcile();
      workers.heartbeat(token(instanceId), { tasks: [] });
      workers.heartbeat(token(instanceId), { tasks: [running] });
      await r.controller.reconcile();
    };
    await r.controller.runRound('submitted');
    await runOn('inst-1');
    expect(store.getJob(job.id)?.state).toBe('running');
    expect(jobRestarts(store, store.getJob(job.id)!)).toEqual([]);

    // The worker falls silent: the next round finds it lost, queues the job and places it on a new instance.
    clock.advance(11);
    await r.controller.runRound('worker lost');
    expect(store.getTask(taskId)?.instanceId).toBe('inst-2');
    await runOn('inst-2');
    expect(store.getJob(job.id)).toMatchObject({ state: 'running', migrations: 0 });

    const why = await whyCli(server, job.id);
    expect(why).toMatch(
      /^round 2 at \S+ \S+: placed on inst-2 \(c7i\.xlarge, new\), restarted because inst-1 was lost: worker stopped heartbeating$/m,
    );
    // The plan's numbers still explain that placement; the first one is a start, no restart.
    expect(why.split('\n').filter((l) => /^ {2}plan /.test(l))).toHaveLength(2);
    expect(why).toMatch(/^round 1 at \S+ \S+: placed on inst-1 \(c7i\.xlarge, new\)$/m);

    expect(jobRestarts(store, store.getJob(job.id)!)).toEqual([
      { atSeconds: expect.any(Number) as unknown, cause: 'inst-1 was lost: worker stopped heartbeating' },
    ]);
    // The job's document carries them (`fleetwise job` prints them); a listing reads no events for them.
    const document = (await (
      await fetch(`${server.url}/v1/jobs/${job.id}`, { headers: { authorization: `Bearer ${ADMIN}` } })
    ).json()) as { restarts?: unknown };
    expect(document.restarts).toEqual([
      { atSeconds: expect.any(Number) as unknown, cause: 'inst-1 was lost: worker stopped heartbeating' },
    ]);
    const listing = (await (
      await fetch(`${server.url}/v1/jobs`, { headers: { authorization: `Bearer ${ADMIN}` } })
    ).json()) as { jobs?: { restarts?: unknown }[] };
    expect(listing.jobs).toHaveLength(1);
    expect(listing.jobs?.[0]?.restarts).toBeUndefined();
  });
});
