import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { readJobLogs } from '../../src/controller/artifacts.js';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { StoredJobLogs, type JobLogReader } from '../../src/controller/job-logs.js';
import { taskLogRunName, taskLogSegmentKey } from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { ADMIN_TOKEN, FakeControllerService, RESNET_SPEC } from '../controller/api-fake-service.js';
import { CLI, ensureBuiltCli } from '../helpers/built-cli.js';
import { bareEnv } from '../helpers/local-controller.js';

/**
 * `fleetwise logs --follow` as users run it (a subprocess) against an API server serving task logs part by part from
 * a real filesystem object store, as workers upload them: a job cancelled while it runs ends at once, while its task
 * runs on until its worker stops it and uploads the rest of its output; following prints that rest before it ends.
 */

/** The API fake, serving the logs workers stored, and counting the reads of their parts (a follower's polls). */
class StoredLogsFake extends FakeControllerService {
  partReads = 0;
  constructor(readonly objects: FsObjectStore) {
    super();
  }
  jobLogs(jobId: string): Promise<string> {
    return readJobLogs(this.objects, jobId);
  }
  jobLogReader(jobId: string): JobLogReader {
    const reader = new StoredJobLogs(this.objects, jobId);
    return {
      parts: () => {
        this.partReads += 1;
        return reader.parts();
      },
      readPart: (name, from, max) => reader.readPart(name, from, max),
      text: () => reader.text(),
    };
  }
}

let tmp = '';
let server: ApiServer;
let service: StoredLogsFake;

beforeAll(async () => {
  ensureBuiltCli();
  tmp = mkdtempSync(join(tmpdir(), 'fw-logs-follow-'));
  service = new StoredLogsFake(new FsObjectStore(join(tmp, 'objects')));
  server = await startApiServer(service, { listen: '127.0.0.1:0', adminToken: ADMIN_TOKEN });
}, 240_000);

afterAll(async () => {
  await server?.close();
  if (tmp !== '') rmSync(tmp, { recursive: true, force: true });
});

/** A running CLI process, its output so far and whether it has exited. */
function startCli(args: readonly string[]) {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: PROJECT_ROOT,
    env: { ...bareEnv(), FLEETWISE_SERVER: server.url, FLEETWISE_TOKEN: ADMIN_TOKEN },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, output: () => ({ stdout, stderr }) };
}

async function until(what: string, predicate: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

it('follows a job cancelled while it runs until its task has stopped, printing the output uploaded with the stop', async () => {
  const job = service.submit(RESNET_SPEC, 'vision');
  const [task] = service.store.listTasks({ jobId: job.id });
  if (task === undefined) throw new Error(`${job.id} has no task`);
  const instance = service.store.createInstance({ typeName: 'c7i.large' });
  service.store.setJobState(job.id, 'starting');
  service.store.setTaskState(task.id, 'running', instance.id);
  service.store.setJobState(job.id, 'running');
  const run = taskLogRunName(task.id, Date.now(), instance.id);
  await service.objects.put(taskLogSegmentKey(job.id, run, 0), Buffer.from('step 1\n'));

  const follow = startCli(['logs', job.id, '--follow', '--interval', '0.1']);
  let exitedEarly = false;
  void follow.exited.then(() => (exitedEarly = true));
  await until('the first output printed', () => follow.output().stdout.includes('step 1'));

  // The cancel ends the job at once; its task runs on (the controller has asked its worker to stop it).
  service.cancel(job.id);
  const readsAtCancel = service.partReads;
  await until('polls after the cancel', () => exitedEarly || service.partReads >= readsAtCancel + 5);
  // The worker stopped the task and uploaded the rest of its output before reporting it stopped.
  await service.objects.put(taskLogSegmentKey(job.id, run, 1), Buffer.from('step 2\nkilled at step 3\n'));
  service.store.setTaskState(task.id, 'stopped');

  expect(await follow.exited).toBe(0);
  const { stdout, stderr } = follow.output();
  expect(stdout).toBe(`==> ${run} <==\nstep 1\nstep 2\nkilled at step 3\n`);
  expect(stderr).toContain(`${job.id} cancelled; following the last output of its 1 task(s) still stopping`);
  expect(stderr.trimEnd().split('\n').at(-1)).toBe(`${job.id} cancelled: cancelled through the API`);
});
