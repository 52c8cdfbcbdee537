import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { counterJobBody, type CounterJobView } from '../helpers/counter-spec.js';
import { startFakeSpotNotices, type FakeSpotNotices } from '../helpers/fake-spot-notices.js';
import {
  killLocalLeftovers,
  startLocalController,
  until,
  type StartedController,
} from '../helpers/local-controller.js';

/**
 * A spot interruption notice end to end, in local mode through the real CLI (controller and workers as processes,
 * process executor): the workers poll a metadata service served over HTTP; the one running the job is told EC2
 * reclaims its instance in two minutes. Its task is checkpointed and uploaded at once (the job checkpoints on its own
 * only hourly, so the notice's is the only checkpoint), the controller hears of it in the next heartbeat, drains the
 * instance and moves the task through its one round, and the job resumes on another instance from that checkpoint:
 * no work is lost beyond it, and all of it happens well within the notice.
 */
const COUNT_TO = 160;

describe('a spot interruption notice (local controller, real CLI, process executor)', () => {
  let scratch: string;
  let notices: FakeSpotNotices;
  let ctl: StartedController | undefined;

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'fw-spot-notice-'));
    notices = await startFakeSpotNotices();
  });
  afterAll(async () => {
    if (ctl !== undefined) {
      ctl.process.kill('SIGTERM');
      await ctl.exited;
      killLocalLeftovers(ctl.stateDir);
    }
    await notices.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  const workerLogs = (stateDir: string): Record<string, string> => {
    const dir = join(stateDir, 'instances');
    const out: Record<string, string> = {};
    if (existsSync(dir))
      for (const i of readdirSync(dir)) {
        const file = join(dir, i, 'worker.log');
        if (existsSync(file)) out[i] = readFileSync(file, 'utf8');
      }
    return out;
  };

  it('checkpoints within the notice, drains the instance and resumes the job elsewhere from that checkpoint', async () => {
    const started = await startLocalController(join(scratch, 'state'), {
      env: { FLEETWISE_IMDS_URL: notices.url, FLEETWISE_NOTICE_POLL_SECONDS: '0.2' },
    });
    ctl = started;
    const submitted = await started.api(
      'POST',
      '/v1/jobs',
      counterJobBody({ countTo: COUNT_TO, checkpointSeconds: 3600, checkpointTimeoutSeconds: 5 }),
    );
    expect(submitted.status, submitted.text).toBe(201);
    const id = (submitted.json as { id: string }).id;
    const job = async (): Promise<CounterJobView> =>
      (await started.api('GET', `/v1/jobs/${id}`)).json as CounterJobView;

    const running = await until(
      'the job to run',
      async () => {
        const doc = await job();
        return doc.state === 'running' && doc.progress.completed >= 30 ? doc : undefined;
      },
      40_000,
      started.diagnostics,
    );
    const first = running.instances[0]?.id ?? '';
    await until('a worker to poll for notices', () => (notices.polls > 0 ? true : undefined), 20_000);
    const doneBefore = (await job()).progress.completed;
    notices.interruptNext(120);

    const moved = await until(
      'the job to run on another instance',
      async () => {
        const doc = await job();
        return doc.state === 'running' && doc.instances.every((i) => i.id !== first) ? doc : undefined;
      },
      60_000,
      started.diagnostics,
    );
    const servedAt = notices.servedAtMs as number;
    // Moved, and running again, well within the two minutes of the notice.
    expect(Date.now() - servedAt).toBeLessThan(60_000);
    expect(moved.migrations).toBeGreaterThanOrEqual(1);

    const done = await until(
      'the job to succeed',
      async () => {
        const doc = await job();
        return doc.state === 'succeeded' ? doc : undefined;
      },
      60_000,
      started.diagnostics,
    );
    expect(done.progress.completed).toBe(COUNT_TO);
    const logs = (await started.api('GET', `/v1/jobs/${id}/logs`)).text;
    expect(logs).toMatch(new RegExp(`finished ${COUNT_TO}`));
    // The notice's checkpoint is the one the job resumed from: at least the work done when the notice came, and
    // exactly where the interrupted run stopped (nothing lost beyond the checkpoint).
    const checkpointedAt = Number(/checkpointed at (\d+) on SIGTERM/.exec(logs)?.[1]);
    const resumedAt = Number(/resumed at (\d+)/.exec(logs)?.[1]);
    expect(checkpointedAt).toBeGreaterThanOrEqual(doneBefore);
    expect(resumedAt).toBe(checkpointedAt);

    // The interrupted instance's worker acted on the notice; the controller says why the job moved.
    const interrupted = Object.values(workerLogs(started.stateDir)).filter((l) =>
      l.includes('spot interruption notice'),
    );
    expect(interrupted).toHaveLength(1);
    const why = (await started.api('GET', `/v1/jobs/${id}/why`)).text;
    expect(why).toMatch(/spot interruption/);
  }, 150_000);
});
