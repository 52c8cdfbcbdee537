import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskRecord } from '../../src/controller/state-store.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { writeExitRecord } from '../../src/worker/exit-record.js';
import { ensureBuiltCli, runCli } from '../helpers/built-cli.js';
import {
  killLocalLeftovers,
  startLocalController,
  taskPid,
  until,
  type StartedController,
} from '../helpers/local-controller.js';

/**
 * A co-started job whose task had already ended when it was started again, end to end with real processes (a local
 * controller, its workers, the process executor): a two-task job, each task on an instance of its own type. The
 * first task's exit is stored and its worker dies before it reports that exit, so the controller restarts the job:
 * the survivor is held ready, and the restarted task's new worker finds the stored exit and reports it succeeded
 * instead of running it again (worker/task-start.ts). The controller settles that task and releases its sibling;
 * the job then ends as its last task does. The test plays the dying worker's last act itself (it stores the exit
 * record the worker would have, then SIGKILLs the worker and the task), so the scenario never depends on when a
 * heartbeat falls.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-co-start-done-'));
const stateDir = join(scratch, 'state');
const finish = join(scratch, 'finish-long');
let controller: StartedController | undefined;

// A file run alone rebuilds dist/ when it is stale, which takes more than the default hook timeout on a slow host.
beforeAll(() => ensureBuiltCli(), 180_000);

afterAll(async () => {
  if (controller !== undefined && controller.process.exitCode === null) {
    controller.process.kill('SIGTERM');
    await controller.exited;
  }
  killLocalLeftovers(stateDir);
  rmSync(scratch, { recursive: true, force: true });
});

/** Two types alike but for their family, so each task of the job needs an instance of its own type. */
function writeCatalog(path: string): void {
  const type = (name: string, family: string) => ({
    name,
    family,
    gpus: 0,
    vcpus: 2,
    memoryGiB: 4,
    costPerHour: 0.1,
    delays: { instantiateSeconds: 0, workerStartSeconds: 1, workerRegisterSeconds: 1, terminateSeconds: 1 },
  });
  writeFileSync(
    path,
    JSON.stringify({
      schemaVersion: 1,
      provider: 'aws',
      region: 'us-east-1',
      types: [type('short.large', 'short'), type('long.large', 'long')],
    }),
  );
}

/** `short` runs until it is killed; `long` until the file `finish` appears, then succeeds. */
function writeJob(path: string): void {
  const task = (name: string, script: string) => ({
    name,
    image: 'busybox:latest',
    command: ['sh', '-c', script],
    demand: { [name]: [0, 1, 1] },
  });
  writeFileSync(
    path,
    JSON.stringify({
      name: 'uneven',
      team: 'examples',
      tasks: [task('short', 'sleep 600'), task('long', `while [ ! -e "${finish}" ]; do sleep 0.2; done`)],
    }),
  );
}

interface JobDoc {
  readonly state: string;
  readonly tasks: readonly TaskRecord[];
  readonly instances: readonly { readonly id: string; readonly cloudId: string }[];
}

describe('co-start of a job whose task had already ended (local mode, real processes)', () => {
  it('settles the task its new worker finds succeeded, releases its sibling, and ends the job', async () => {
    const catalog = join(scratch, 'catalog.json');
    writeCatalog(catalog);
    controller = await startLocalController(stateDir, {
      config: [`catalog: ${catalog}`, 'coStart: true', 'coStartTimeoutSeconds: 600'],
    });
    const c = controller;
    const diagnostics = (): string => c.diagnostics();
    const spec = join(scratch, 'job.json');
    writeJob(spec);
    const submitted = await runCli(['submit', spec, '--catalog', catalog, '--json'], c.env);
    expect(submitted.code, submitted.stderr).toBe(0);
    const jobId = (JSON.parse(submitted.stdout) as { id: string }).id;
    const [shortId, longId] = [`${jobId}.0`, `${jobId}.1`];
    const job = async (): Promise<JobDoc> => {
      const r = await c.api('GET', `/v1/jobs/${jobId}`);
      if (r.status !== 200) throw new Error(`GET /v1/jobs/${jobId}: HTTP ${r.status}`);
      return r.json as JobDoc;
    };
    const taskOf = (doc: JobDoc, id: string): TaskRecord | undefined => doc.tasks.find((t) => t.id === id);

    // Both tasks released and running, each on its own instance.
    const running = await until(
      'both tasks to run',
      async () => {
        const doc = await job();
        return doc.state === 'running' && doc.tasks.every((t) => t.state === 'running') ? doc : undefined;
      },
      60_000,
      diagnostics,
    );
    const shortOn = running.instances.find((i) => i.id === taskOf(running, shortId)?.instanceId)?.cloudId;
    const local = c.instances().find((i) => i.instanceId === shortOn);
    expect(local?.pid).toBeDefined();
    const shortDir = local?.dir as string;
    const shortPid = await until('the short task’s process', () => taskPid(shortDir, shortId), 10_000);

    // The worker's last act before it dies: the exit stored (exit-record.ts), not yet reported.
    await writeExitRecord(new FsObjectStore(join(stateDir, 'objects')), {
      version: 1,
      jobId,
      taskId: shortId,
      attempt: 1,
      state: 'succeeded',
      exitCode: 0,
      instanceId: shortOn,
      exitedAt: new Date().toISOString(),
    });
    process.kill(local?.pid as number, 'SIGKILL');
    process.kill(-shortPid, 'SIGKILL');

    // Restarted, the short task is found done and settled; the long one, held for it, is released.
    const settled = await until(
      'the short task found done and the long one released',
      async () => {
        const doc = await job();
        return taskOf(doc, shortId)?.state === 'succeeded' && taskOf(doc, longId)?.state === 'running'
          ? doc
          : undefined;
      },
      60_000,
      diagnostics,
    );
    expect(settled.state).toBe('running');
    // It was restarted and not run again (the case at hand), not heard succeeded from the worker that died.
    const logs = c
      .instances()
      .map((i) => join(i.dir, 'worker.log'))
      .filter((f) => existsSync(f))
      .map((f) => readFileSync(f, 'utf8'))
      .join('\n');
    expect(logs).toMatch(new RegExp(`task ${shortId.replace('.', '\\.')} already succeeded .*not run again`));

    // The long task ends, and with it the job.
    writeFileSync(finish, '');
    const ended = await until(
      'the job to end',
      async () => {
        const doc = await job();
        return ['succeeded', 'failed', 'cancelled', 'unsuccessful'].includes(doc.state) ? doc : undefined;
      },
      60_000,
      diagnostics,
    );
    expect(ended.state).toBe('succeeded');
    expect(ended.tasks.map((t) => t.state)).toEqual(['succeeded', 'succeeded']);
  }, 240_000);
});
