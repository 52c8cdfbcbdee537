import { describe, expect, it } from 'vitest';
import { startApiServer } from '../../src/controller/api/server.js';
import { MemoryStateStore } from '../../src/controller/memory-state-store.js';
import type { StateStore } from '../../src/controller/state-store.js';
import { ManualClock } from '../../src/controller/clock.js';
import { BURST_QUIET_MS } from '../../src/controller/predictions.js';
import { catalog, CPU_SMALL, jobSpec, rig } from './controller-fixtures.js';

/**
 * A submission costs the same whatever the number of jobs: it reads and writes only the new job's records (no list
 * of every job, task, instance, intent or event), and its prediction runs later, from one snapshot for a burst of
 * submissions. The store is wrapped to count what each submission asks of it.
 */

const ADMIN = 'admin-token-submission-cost-0123456789';

/** Calls that read a whole table (or all of one state), by name: what a submission must never make. */
const SCANS: Readonly<Record<string, (args: readonly unknown[]) => boolean>> = {
  listJobs: () => true,
  listTasks: ([filter]) => {
    const f = filter as { jobId?: string; instanceId?: string } | undefined;
    return f?.jobId === undefined && f?.instanceId === undefined;
  },
  listInstances: () => true,
  listIntents: () => true,
  listEvents: ([filter]) => {
    const f = filter as { jobId?: string; instanceId?: string } | undefined;
    return f?.jobId === undefined && f?.instanceId === undefined;
  },
  countByState: () => true,
};

interface Counting {
  readonly store: StateStore;
  calls: number;
  scans: string[];
}

function counting(inner: StateStore): Counting {
  const counts: Counting = { store: inner, calls: 0, scans: [] };
  const store = new Proxy(inner, {
    get(target, name, receiver) {
      const value: unknown = Reflect.get(target, name, receiver);
      if (typeof value !== 'function' || typeof name !== 'string') return value;
      return (...args: unknown[]) => {
        counts.calls += 1;
        if (SCANS[name]?.(args) === true) counts.scans.push(name);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return Object.assign(counts, { store });
}

async function post(url: string, body: unknown): Promise<number> {
  const response = await fetch(`${url}/v1/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  await response.text();
  return response.status;
}

const spec = (name: string): Record<string, unknown> => ({
  name,
  team: 'research',
  tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 4, 8] } }],
  expectedDurationSeconds: 3600,
});

describe('the cost of a submission', () => {
  it('is the same store work with 10 or 2,000 jobs stored, and never a scan, over HTTP', async () => {
    const clock = new ManualClock();
    const inner = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const count = counting(inner);
    const r = rig({}, { clock, store: count.store, predict: false });
    const server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
    try {
      const perSubmission = async (n: number): Promise<number> => {
        count.calls = 0;
        count.scans = [];
        for (let i = 0; i < n; i++) expect(await post(server.url, spec(`job-${i}`))).toBe(201);
        expect(count.scans).toEqual([]);
        return count.calls / n;
      };
      const few = await perSubmission(10);
      // 2,000 more jobs, with tasks, straight into the store.
      const stored = jobSpec('stored', CPU_SMALL, { expectedDurationSeconds: 600 });
      for (let i = 0; i < 2000; i++) inner.submitJob(stored);
      const many = await perSubmission(10);
      expect(many).toBe(few);
      expect(few).toBeLessThan(20);
    } finally {
      await server.close();
      await r.controller.stop();
    }
  });

  it('with predictions on, a burst of submissions reads one snapshot for its prediction, after they returned', async () => {
    const clock = new ManualClock();
    const count = counting(new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() }));
    const r = rig({}, { clock, store: count.store });
    count.scans = [];
    for (let i = 0; i < 50; i++)
      r.controller.submit(jobSpec(`burst-${i}`, CPU_SMALL, { expectedDurationSeconds: 600 }), 'research');
    // The submissions themselves scanned nothing.
    expect(count.scans).toEqual([]);
    await r.controller.predictionsSettled();
    // One prediction, from one snapshot (readSnapshotInputs lists jobs once) for all 50.
    expect(count.scans.filter((s) => s === 'listJobs')).toHaveLength(1);
    await r.controller.stop();
  });

  it('a burst spread over time gets no prediction while it goes on: one at its start, one once it is quiet', async () => {
    const clock = new ManualClock();
    const inner = new MemoryStateStore({ nowSeconds: () => clock.nowSeconds() });
    const snapshotsAt: number[] = [];
    const store = new Proxy(inner, {
      get(target, name, receiver) {
        const value: unknown = Reflect.get(target, name, receiver);
        if (name !== 'listJobs' || typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          snapshotsAt.push(performance.now());
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const r = rig({}, { clock, store });
    let lastSubmissionAt = 0;
    for (let i = 0; i < 30; i++) {
      r.controller.submit(jobSpec(`stream-${i}`, CPU_SMALL, { expectedDurationSeconds: 600 }), 'research');
      lastSubmissionAt = performance.now();
      await new Promise((resolve) => setTimeout(resolve, 40));
    }
    // 30 submissions over more than a second: only the first one's prediction ran meanwhile.
    expect(snapshotsAt).toHaveLength(1);
    await r.controller.predictionsSettled();
    expect(snapshotsAt).toHaveLength(2);
    expect((snapshotsAt[1] as number) - lastSubmissionAt).toBeGreaterThanOrEqual(BURST_QUIET_MS - 5);
    await r.controller.stop();
  });
});
