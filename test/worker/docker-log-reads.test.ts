import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { readAll } from '../../src/storage/streams.js';
import type { LogPosition, TaskLaunch } from '../../src/worker/executor.js';
import { DockerExecutor } from '../../src/worker/executors/docker.js';
import { TaskLogShipper } from '../../src/worker/task-log.js';
import { BASE_IMAGE, describeWithDocker } from '../helpers/dockerd.js';
import { shellLaunch } from './agent-fixtures.js';

/**
 * The Docker executor's incremental log reads against the real engine: `since` with timestamps, lines sharing the
 * boundary's stamp skipped by count, a line longer than the engine's 16 KiB split, and a restarted worker's read
 * that knows only how many bytes it stored.
 */
describeWithDocker('docker executor: reading a log from a position', (engine) => {
  let tmp: string;
  let executor: DockerExecutor;
  beforeAll(() => {
    tmp = mkdtempSync(join(tmpdir(), 'fw-docker-logs-'));
    executor = new DockerExecutor({ docker: engine.docker });
  });
  afterAll(async () => {
    for (const t of await executor.list()) await executor.remove(t.taskId);
    rmSync(tmp, { recursive: true, force: true });
  });

  const launch = (taskId: string, script: string): TaskLaunch => shellLaunch(tmp, taskId, script, BASE_IMAGE);

  async function exited(taskId: string): Promise<void> {
    for (let i = 0; (await executor.status(taskId))?.state !== 'exited'; i += 1) {
      if (i > 600) throw new Error(`${taskId} never exited`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  // stdout and stderr interleaved, bursts of lines stamped within microseconds, and one 40 000-byte line.
  const SCRIPT = [
    'for b in 1 2 3 4; do i=0; while [ $i -lt 400 ]; do echo "out $b.$i"; echo "err $b.$i" >&2; i=$((i+1)); done; sleep 0.4; done',
    'head -c 40000 /dev/zero | tr "\\0" z; echo',
    'echo done',
  ].join('; ');

  it('reads only what is past the position, in small pieces while it runs, the whole log once over', async () => {
    await executor.start(launch('inc-1.0', SCRIPT));
    let position: LogPosition = { bytes: 0 };
    const pieces: Buffer[] = [];
    let reads = 0;
    for (let finished = false; !finished;) {
      finished = (await executor.status('inc-1.0'))?.state === 'exited';
      for (;;) {
        const chunk = await executor.readLogs('inc-1.0', position, 3000);
        reads += 1;
        expect(chunk.next.bytes).toBe(position.bytes + chunk.data.length);
        // Whole lines only, so a piece is at most the bound plus one line (a 16 KiB part of the long one).
        expect(chunk.data.length).toBeLessThanOrEqual(3000 + 16 * 1024);
        position = chunk.next;
        if (chunk.data.length === 0) break;
        pieces.push(chunk.data);
      }
      if (!finished) await new Promise((r) => setTimeout(r, 100));
    }
    expect(position.resume).toMatch(new RegExp(`^\\d+:\\d+:${position.bytes}$`));
    const whole = await readAll(await executor.logs('inc-1.0'));
    const text = Buffer.concat(pieces).toString('utf8');
    expect(text.length).toBe(whole.length);
    expect(text).toBe(whole.toString('utf8'));
    expect(text).toContain(`${'z'.repeat(40000)}\n`);
    expect(reads).toBeGreaterThan(10);
    // Past the end: nothing, however often asked.
    expect((await executor.readLogs('inc-1.0', position, 3000)).data).toHaveLength(0);
  });

  it('a restarted worker resumes from the bytes it stored: no line lost, none repeated', async () => {
    await executor.start(launch('resume-1.0', SCRIPT));
    const store = new FsObjectStore(join(tmp, 'store'));
    const run = { jobId: 'resume-1', taskId: 'resume-1.0', startedAtMs: Date.now() };
    const first = new TaskLogShipper(store, executor, run, () => 'inst-1', 2048);
    await new Promise((r) => setTimeout(r, 300));
    expect(await first.ship()).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 500));
    await first.ship();
    // A new shipper knows only what is stored: its first read scans from the start, skipping the stored bytes.
    const second = new TaskLogShipper(store, executor, run, () => 'inst-1', 2048);
    await exited('resume-1.0');
    await second.ship();
    const segments: Buffer[] = [];
    for await (const info of store.list('logs/resume-1/')) segments.push(await store.getBuffer(info.key));
    const whole = (await readAll(await executor.logs('resume-1.0'))).toString('utf8');
    const stored = Buffer.concat(segments).toString('utf8');
    expect(stored).toBe(whole);
    const lines = stored.trimEnd().split('\n');
    expect(lines.filter((l) => l.startsWith('out '))).toHaveLength(1600);
    expect(new Set(lines.filter((l) => l.startsWith('err '))).size).toBe(1600);
  });

  it('a restarted worker resumes from a read position saved a while before: from its note on, not the start', async () => {
    await executor.start(launch('saved-1.0', SCRIPT));
    const store = new FsObjectStore(join(tmp, 'store-saved'));
    const run = { jobId: 'saved-1', taskId: 'saved-1.0', startedAtMs: Date.now() };
    const first = new TaskLogShipper(store, executor, run, () => 'inst-1', 2048);
    await new Promise((r) => setTimeout(r, 300));
    await first.ship(4096);
    // What the task's record kept: a position a few ships behind what is stored by the time the worker restarts.
    const saved = first.position as LogPosition;
    expect(saved.resume).toBeDefined();
    await new Promise((r) => setTimeout(r, 500));
    await first.ship(8192);
    expect((first.position as LogPosition).bytes).toBeGreaterThan(saved.bytes);
    // The new shipper's reads start at the saved note (bytes past it are skipped), never from byte 0.
    const asked: LogPosition[] = [];
    const watching = Object.create(executor) as DockerExecutor;
    watching.readLogs = (taskId, from, maxBytes) => {
      asked.push(from);
      return executor.readLogs(taskId, from, maxBytes);
    };
    const second = new TaskLogShipper(store, watching, run, () => 'inst-1', 2048, saved);
    await exited('saved-1.0');
    await second.ship();
    expect(asked[0]?.resume).toBe(saved.resume);
    const segments: Buffer[] = [];
    for await (const info of store.list('logs/saved-1/')) segments.push(await store.getBuffer(info.key));
    const whole = (await readAll(await executor.logs('saved-1.0'))).toString('utf8');
    expect(Buffer.concat(segments).toString('utf8')).toBe(whole);
  });

  it("a failed task's last lines come from the end of its log", async () => {
    await executor.start(
      launch('tail-1.0', 'i=0; while [ $i -lt 500 ]; do echo "line $i"; i=$((i+1)); done; exit 2'),
    );
    await exited('tail-1.0');
    expect(await executor.logTail('tail-1.0', 3)).toBe('line 497\nline 498\nline 499');
  });
});
