import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseTaskLogKey, taskLogPrefix } from '../../src/protocol/object-keys.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';
import type { Executor, LogChunk, LogPosition, TaskLaunch } from '../../src/worker/executor.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { TaskLogShipper } from '../../src/worker/task-log.js';
import type { DesiredTask } from '../../src/protocol/worker-protocol.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { TaskLifecycle } from '../../src/worker/task-lifecycle.js';
import { shellLaunch } from './agent-fixtures.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

/**
 * Shipping a run's output as segments, with the real process executor and the real filesystem object store: only
 * what is new is read and stored, sealed segments are at least the bound, and a restarted worker (a new shipper
 * knowing only the store) goes on where the stored segments end.
 */
const tmp = mkdtempSync(join(tmpdir(), 'fw-task-log-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const launch = (taskId: string, script: string): TaskLaunch => shellLaunch(tmp, taskId, script);

/** The process executor, counting the bytes it hands out to shippers: what shipping costs. */
class CountingExecutor extends ProcessExecutor {
  bytesRead = 0;
  override async readLogs(taskId: string, from: LogPosition, maxBytes: number): Promise<LogChunk> {
    const chunk = await super.readLogs(taskId, from, maxBytes);
    this.bytesRead += chunk.data.length;
    return chunk;
  }
}

async function exited(executor: Executor, taskId: string): Promise<void> {
  for (let i = 0; (await executor.status(taskId))?.state !== 'exited'; i += 1) {
    if (i > 400) throw new Error(`${taskId} never exited`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The run's segments in order: their sizes, and their bodies concatenated. */
async function storedRun(store: FsObjectStore, jobId: string): Promise<{ sizes: number[]; text: string }> {
  const segments: { seq: number; key: string; size: number }[] = [];
  for await (const info of store.list(taskLogPrefix(jobId))) {
    const parsed = parseTaskLogKey(jobId, info.key);
    if (parsed?.kind !== 'segment') throw new Error(`not a segment: ${info.key}`);
    segments.push({ seq: parsed.seq, key: info.key, size: info.sizeBytes });
  }
  segments.sort((a, b) => a.seq - b.seq);
  const bodies = await Promise.all(segments.map((s) => store.getBuffer(s.key)));
  return { sizes: segments.map((s) => s.size), text: Buffer.concat(bodies).toString('utf8') };
}

describe('task log shipping', () => {
  it('stores only what is new, sealing segments at the bound; the executor is read once over', async () => {
    const inner = new CountingExecutor({ stateDir: join(tmp, 'seal-executor') });
    const store = new FsObjectStore(join(tmp, 'seal-store'));
    const run = { jobId: 'seal-1', taskId: 'seal-1.0', startedAtMs: 1_700_000_000_000 };
    // Output in bursts, shipped in between as a running task's is: each ship must read only the new burst.
    await inner.start(
      launch(
        run.taskId,
        'for b in 1 2 3; do i=0; while [ $i -lt 200 ]; do echo "burst $b line $i"; i=$((i+1)); done; sleep 0.3; done',
      ),
    );
    const shipper = new TaskLogShipper(store, inner, run, () => 'inst-1', 1000);
    let ships = 0;
    while ((await inner.status(run.taskId))?.state !== 'exited') {
      await shipper.ship();
      ships += 1;
      await new Promise((r) => setTimeout(r, 100));
    }
    await shipper.ship();
    const whole = (await readAll(await inner.logs(run.taskId))).toString('utf8');
    expect(whole.split('\n')).toHaveLength(601);
    const stored = await storedRun(store, run.jobId);
    expect(stored.text).toBe(whole);
    expect(ships).toBeGreaterThan(2);
    // Read once over, however many ships there were (the whole log each time would be several times this).
    expect(inner.bytesRead).toBe(whole.length);
    const sealed = stored.sizes.slice(0, -1);
    expect(sealed.length).toBeGreaterThan(5);
    for (const size of sealed) expect(size).toBe(1000);
    expect(stored.sizes.at(-1)).toBeLessThanOrEqual(1000);
    expect(stored.sizes.at(-1)).toBeGreaterThan(0);
  });

  it('a run that wrote nothing leaves an empty part at its last ship, not before', async () => {
    const store = new FsObjectStore(join(tmp, 'store-silent'));
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'exec-silent') });
    await executor.start(launch('job-9.0', 'true'));
    await exited(executor, 'job-9.0');
    const shipper = new TaskLogShipper(
      store,
      executor,
      { jobId: 'job-9', taskId: 'job-9.0', startedAtMs: 5 },
      () => 'i-1',
    );
    // A periodic ship (with a budget) of a run with no output stores nothing.
    expect(await shipper.ship(1024)).toBe(0);
    expect((await storedRun(store, 'job-9')).sizes).toEqual([]);
    // The last ship records the run: one empty segment, once.
    await shipper.ship();
    await shipper.ship();
    expect((await storedRun(store, 'job-9')).sizes).toEqual([0]);
  });

  it('a restarted worker (a new shipper, knowing only the store) neither loses nor repeats a line', async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'restart-executor') });
    const store = new FsObjectStore(join(tmp, 'restart-store'));
    const run = { jobId: 'restart-1', taskId: 'restart-1.0', startedAtMs: 1_700_000_000_001 };
    await executor.start(
      launch(
        run.taskId,
        'i=0; while [ $i -lt 3000 ]; do echo "line $i"; i=$((i+1)); [ $((i % 300)) -eq 0 ] && sleep 0.05; done',
      ),
    );
    const first = new TaskLogShipper(store, executor, run, () => 'inst-1', 700);
    await first.ship();
    await new Promise((r) => setTimeout(r, 150));
    await first.ship();
    const before = (await storedRun(store, run.jobId)).text;
    expect(before.length).toBeGreaterThan(0);
    // The worker restarts mid-run, under another registration (its instance id must not start a second run).
    const second = new TaskLogShipper(store, executor, run, () => 'inst-2', 700);
    await exited(executor, run.taskId);
    await second.ship();
    const stored = await storedRun(store, run.jobId);
    const lines = stored.text.trimEnd().split('\n');
    expect(lines).toEqual(Array.from({ length: 3000 }, (_, i) => `line ${i}`));
    expect(stored.text.startsWith(before)).toBe(true);
    const keys: string[] = [];
    for await (const info of store.list(taskLogPrefix(run.jobId))) keys.push(info.key);
    expect(keys.every((k) => k.includes('-restart-1.0-inst-1.log.segments/'))).toBe(true);
  });

  it('a log hundreds of times the segment bound ships in bounded pieces, read once over (the 600 MiB case, scaled)', async () => {
    const inner = new CountingExecutor({ stateDir: join(tmp, 'big-executor') });
    const puts: number[] = [];
    const store = new FsObjectStore(join(tmp, 'big-store'));
    const recording = new Proxy(store, {
      get: (target, property, receiver): unknown =>
        property === 'put'
          ? async (key: string, body: Buffer): Promise<void> => {
              puts.push(body.length);
              await target.put(key, body);
            }
          : (Reflect.get(target, property, receiver) as unknown),
    });
    const run = { jobId: 'big-1', taskId: 'big-1.0', startedAtMs: 1_700_000_000_002 };
    // 2 MiB of output against 4 KiB segments: as 600 MiB is against 1 MiB ones (512 times the bound).
    await inner.start(launch(run.taskId, 'head -c 2097152 /dev/zero | tr "\\0" "x"; echo'));
    await exited(inner, run.taskId);
    const shipper = new TaskLogShipper(recording, inner, run, () => 'inst-1', 4096);
    await shipper.ship();
    const size = 2 * 1024 * 1024 + 1;
    expect(inner.bytesRead).toBe(size);
    expect(Math.max(...puts)).toBeLessThanOrEqual(4096);
    expect(puts.reduce((a, b) => a + b, 0)).toBe(size);
    const stored = await storedRun(store, run.jobId);
    expect(stored.sizes).toHaveLength(Math.ceil(size / 4096));
    expect(stored.text.length).toBe(size);
    // Nothing new: a ship reads and stores nothing.
    puts.length = 0;
    expect(await shipper.ship()).toBe(0);
    expect(puts).toEqual([]);
  });

  it("a failed task's last lines are read from the end of its output, however long", async () => {
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'tail-executor') });
    await executor.start(
      launch(
        'tail-1.0',
        'head -c 3000000 /dev/zero | tr "\\0" "y"; echo; i=0; while [ $i -lt 8 ]; do echo "last $i"; i=$((i+1)); done; exit 3',
      ),
    );
    await exited(executor, 'tail-1.0');
    expect(await executor.logTail('tail-1.0', 5)).toBe(
      ['last 3', 'last 4', 'last 5', 'last 6', 'last 7'].join('\n'),
    );
  });

  it('a worker restarted mid-run adopts the task and ships on where the stored log ends; a failure quotes its end', async () => {
    const workDir = join(tmp, 'adopt-work');
    const executor = new ProcessExecutor({ stateDir: join(tmp, 'adopt-executor') });
    const store = new FsObjectStore(join(tmp, 'adopt-store'));
    const worker = (): TaskLifecycle =>
      new TaskLifecycle(
        {
          connection: new ControllerClient(UNREACHABLE_URL),
          credentials: { launch: launchSecretCredential('unused') },
          executor,
          openStore: () => store,
          cloudInstanceId: 'local-test',
          workDir,
          logUploadSeconds: 0,
          logSegmentBytes: 512,
        },
        { info: () => undefined, warn: () => undefined },
        () => ({ store, instanceId: 'inst-1' }),
        new AbortController().signal,
      );
    const desired: DesiredTask = {
      taskId: 'adopt-1.0',
      jobId: 'adopt-1',
      action: 'run',
      restore: false,
      attempt: 1,
      launch: {
        command: [
          'sh',
          '-c',
          'i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); [ $((i % 200)) -eq 0 ] && sleep 0.1; done; exit 4',
        ],
        env: {},
        vcpus: 1,
        memoryGiB: 0,
        gpus: 0,
        shmSizeGiB: 0,
      },
      checkpoint: { signal: 'SIGTERM', timeoutSeconds: 5 },
    };
    const first = worker();
    first.start(desired);
    await first.settle();
    await new Promise((r) => setTimeout(r, 300));
    first.shipRunningLogs();
    await first.settle();
    const shippedBefore = (await storedRun(store, 'adopt-1')).text;
    expect(shippedBefore).toMatch(/^line 0\n/);
    await first.stopWatchers();
    // The read position went with the task's record, for the next worker to start from.
    const record = JSON.parse(readFileSync(join(workDir, 'tasks', 'adopt-1.0', 'agent.json'), 'utf8')) as {
      logPosition?: { bytes: number };
    };
    expect(record.logPosition?.bytes).toBe(Buffer.byteLength(shippedBefore));

    const second = worker();
    await second.adopt();
    second.shipRunningLogs();
    await second.settle();
    await exited(executor, 'adopt-1.0');
    await second.observe();
    await second.settle();
    const task = second.get('adopt-1.0');
    expect(task?.phase).toBe('failed');
    expect(task?.reason).toBe(
      `exit code 4; last output:\n${[1995, 1996, 1997, 1998, 1999].map((i) => `line ${i}`).join('\n')}`,
    );
    const stored = await storedRun(store, 'adopt-1');
    expect(stored.text.startsWith(shippedBefore)).toBe(true);
    expect(stored.text.trimEnd().split('\n')).toEqual(Array.from({ length: 2000 }, (_, i) => `line ${i}`));
  });
});
