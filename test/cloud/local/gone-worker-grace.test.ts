import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { LocalProvider } from '../../../src/cloud/local/local-provider.js';
import { LOCAL_DEFAULTS } from '../../../src/controller/config-loading.js';
import { table3Catalog } from '../../helpers/catalogs.js';
import { killProcessGroups } from '../../helpers/processes-under.js';
import { pidAlive } from '../../helpers/local-controller.js';
import { fakeProcessWorkerSpawner } from '../../helpers/fake-worker-spawner.js';

/**
 * The grace a local worker killed without a word gets (to be started again) against the local heartbeat timeout, at
 * the local defaults' pace: the controller lists the instances every poll, and a pass replaces silent workers before it
 * lists, so the provider must close the instance at a list before the timeout runs out, or the instance is replaced as
 * a silent worker and its process death is never said. The worker is a real process (a stand-in the real spawner
 * starts, as test/cloud/local-provider.test.ts does), SIGKILLed; the provider's clock is stepped pass by pass.
 */
const tmp = mkdtempSync(join(tmpdir(), 'fw-gone-grace-'));
const FAKE_WORKER = join(tmp, 'fake-worker.mjs');
const pids: number[] = [];

afterAll(() => {
  killProcessGroups(pids);
  rmSync(tmp, { recursive: true, force: true });
});

async function waitDead(pid: number): Promise<void> {
  while (pidAlive(pid)) await new Promise((r) => setTimeout(r, 20));
}

it('closes a SIGKILLed local worker’s instance, dated when first seen gone, at a poll before the local heartbeat timeout', async () => {
  writeFileSync(FAKE_WORKER, 'setInterval(() => {}, 1000);\n');
  let clockMs = 1_000_000;
  const provider = new LocalProvider({
    stateFile: join(tmp, 'local-instances.json'),
    instancesDir: join(tmp, 'instances'),
    catalog: table3Catalog(),
    nowMs: () => clockMs,
    spawner: fakeProcessWorkerSpawner(FAKE_WORKER),
  });
  const request = (token: string) => ({
    typeName: 'c.x',
    idempotencyToken: token,
    clusterName: 'local',
    planId: 'plan-1',
    instanceKey: `slot-${token}`,
  });
  const killed = (await provider.launch(request('k-1'))).instanceIds[0] as string;
  const kept = (await provider.launch(request('k-2'))).instanceIds[0] as string;
  const pidOf = (id: string): number => provider.instances().find((i) => i.instanceId === id)?.pid as number;
  pids.push(pidOf(killed), pidOf(kept));

  const pollMs = LOCAL_DEFAULTS.pollSeconds * 1000;
  const heartbeatMs = LOCAL_DEFAULTS.workerHeartbeatSeconds * 1000;
  const timeoutMs = LOCAL_DEFAULTS.workerHeartbeatTimeoutSeconds * 1000;
  // The worst case: its last heartbeat at 0, killed just before the next, and a pass that just missed the death.
  const lastHeartbeatMs = clockMs;
  process.kill(pidOf(killed), 'SIGKILL');
  await waitDead(pidOf(killed));
  clockMs = lastHeartbeatMs + heartbeatMs + pollMs;
  const firstSeenMs = clockMs;
  let closedAtMs: number | undefined;
  // Every pass until the one at which the heartbeat timeout has run out: that pass replaces the silent worker first.
  while (clockMs - lastHeartbeatMs < timeoutMs) {
    const listed = (await provider.list('local')).map((i) => i.instanceId);
    expect(listed).toContain(kept);
    if (!listed.includes(killed)) {
      closedAtMs = clockMs;
      break;
    }
    clockMs += pollMs;
  }
  expect(closedAtMs, `still listed ${timeoutMs} ms after the killed worker's last heartbeat`).toBeDefined();
  const ended = (await provider.list('local', { includeTerminated: true })).find(
    (i) => i.instanceId === killed,
  );
  expect(ended?.state).toBe('terminated');
  expect(ended?.endedAt?.getTime()).toBe(firstSeenMs);
  expect(pidAlive(pidOf(kept))).toBe(true);
});
