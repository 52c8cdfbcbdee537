import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointKeys } from '../../src/protocol/object-keys.js';
import type { CheckpointSignal } from '../../src/protocol/worker-protocol.js';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import { listCheckpoints, restoreLatestCheckpoint } from '../../src/worker/checkpoints.js';
import type { Executor } from '../../src/worker/executor.js';
import { DockerExecutor } from '../../src/worker/executors/docker.js';
import { ProcessExecutor } from '../../src/worker/executors/process.js';
import { BASE_IMAGE, describeWithDocker } from '../helpers/dockerd.js';
import { offlineLifecycle, shellTask, until } from './agent-fixtures.js';

/**
 * A checkpoint-stop of a task that never marks its checkpoints, met by the signal while it rewrites its state file:
 * an exit that says the signal ended it (143: no handler, or `trap 'exit 143' TERM`; 137; 128 + the stop's signal)
 * may have left the file half-written, so only a marked checkpoint is taken and the task resumes from its last
 * complete upload. A task that finishes its state on the signal and exits 0 still has that final state uploaded.
 * Real executors (the process executor, and Docker with a private dockerd), a filesystem object store.
 */
const tmp = mkdtempSync(join(tmpdir(), 'fleetwise-torn-final-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** The complete state the task writes first: what the watcher uploads once the directory is quiet. */
const FIRST_STATE = 'BEGIN 1\ndata 1\nEND\n';
const FINAL_STATE = 'BEGIN 3\ndata 3\nEND\n';

/**
 * Writes FIRST_STATE, then waits for SIGUSR1 (sent once that state is uploaded) to rewrite the file a line at a time
 * without end: the signal of the stop always meets it mid-write. `onTerm` is its TERM trap (none: SIGTERM's default).
 */
function rewriter(onTerm: string | undefined): string {
  return [
    'd="$FLEETWISE_CHECKPOINT_DIR"; go=0',
    "trap 'go=1' USR1",
    ...(onTerm === undefined ? [] : [`trap '${onTerm}' TERM`]),
    `printf '${FIRST_STATE.replace(/\n/g, '\\n')}' > "$d/state"`,
    'while [ "$go" = 0 ]; do sleep 0.05; done',
    'echo "BEGIN 2" > "$d/state"; k=0',
    'while :; do k=$((k+1)); echo "line $k" >> "$d/state"; sleep 0.05; done',
  ].join('\n');
}

interface Case {
  readonly name: string;
  readonly script: string;
  readonly signal?: CheckpointSignal;
  readonly exitCode: number;
  /** What a restore gives after the stop. */
  readonly restored: string;
}

const TORN: readonly Case[] = [
  {
    name: "traps TERM with 'exit 143'",
    script: rewriter('exit 143'),
    exitCode: 143,
    restored: FIRST_STATE,
  },
];
const FINISHES: Case = {
  name: 'writes its final state on TERM and exits 0',
  script: rewriter(`printf "${FINAL_STATE.replace(/\n/g, '\\n')}" > "$d/state"; exit 0`),
  exitCode: 0,
  restored: FINAL_STATE,
};

const resumesFrom = (c: Case): string =>
  c.restored === FIRST_STATE ? 'its last complete upload' : 'its final state';

/** Start the case's task, let its first state be uploaded, start its rewrite, checkpoint-stop it, check the store. */
async function checkpointStopMidWrite(
  executor: Executor,
  label: string,
  c: Case,
  launch: { image?: string } = {},
): Promise<void> {
  const taskId = `${label}-1.0`;
  const ref = { jobId: `${label}-1`, taskId };
  const store = new FsObjectStore(join(tmp, `${label}-store`));
  const workDir = join(tmp, `${label}-work`);
  // Polls of 200 ms: an unmarked directory is uploaded after 600 ms unchanged; the rewrite changes it every 50 ms.
  const tasks = offlineLifecycle(executor, store, workDir, 200);
  try {
    tasks.start(shellTask(taskId, c.script, {}, launch));
    await tasks.settle();
    const task = tasks.get(taskId);
    if (task === undefined) throw new Error('not started');
    const first = await until('the first state uploaded', async () => task.checkpoint ?? undefined, 30_000);
    expect(first.key).toBe(checkpointKeys(ref, 1).manifest);
    await executor.signal(taskId, 'SIGUSR1');
    const stateFile = join(workDir, 'tasks', taskId, 'checkpoint', 'state');
    await until('the rewrite under way', async () =>
      existsSync(stateFile) && /^BEGIN 2\nline 1\nline 2\n/.test(readFileSync(stateFile, 'utf8'))
        ? true
        : undefined,
    );
    const before = await listCheckpoints(store, ref);
    // Only the first state: the rewrite never went quiet long enough to be taken for a checkpoint.
    expect(before.map((s) => [s.seq, s.complete])).toEqual([[1, true]]);

    await tasks.stop(task, true, { signal: c.signal ?? 'SIGTERM', timeoutSeconds: 20 });
    const [report] = tasks.reports();
    expect(report).toMatchObject({ taskId, state: 'stopped' });
    // The exit the case is about (the report of a stop carries none).
    expect(await executor.status(taskId)).toMatchObject({ state: 'exited', exitCode: c.exitCode });
    const dest = join(tmp, `${label}-restored`);
    const { manifest } = await restoreLatestCheckpoint(store, ref, dest);
    // What the controller is told to resume from is what a restore picks.
    expect(report?.checkpoint?.key).toBe(checkpointKeys(ref, manifest?.seq ?? 0).manifest);
    expect(readFileSync(join(dest, 'state'), 'utf8')).toBe(c.restored);
    if (c.restored === FIRST_STATE)
      expect((await listCheckpoints(store, ref)).map((s) => s.seq)).toEqual([1]);
  } finally {
    await tasks.stopWatchers();
    await executor.remove(taskId).catch(() => undefined);
  }
}

describe('a checkpoint-stop meeting an unmarked task mid-write (process executor)', () => {
  const executor = new ProcessExecutor({ stateDir: join(tmp, 'executor') });
  const cases: readonly Case[] = [
    ...TORN,
    {
      name: 'has no handler for SIGTERM (its default: exit 143)',
      script: rewriter(undefined),
      exitCode: 143,
      restored: FIRST_STATE,
    },
    {
      name: 'is killed on the signal by another hand (exit 137)',
      script: rewriter('kill -9 $$'),
      exitCode: 137,
      restored: FIRST_STATE,
    },
    {
      name: "has no handler for the job's own checkpoint signal, SIGUSR2 (exit 140)",
      script: rewriter(undefined),
      signal: 'SIGUSR2',
      exitCode: 140,
      restored: FIRST_STATE,
    },
    FINISHES,
  ];
  for (const [i, c] of cases.entries())
    it(`${c.name}: resumes from ${resumesFrom(c)}`, async () => {
      await checkpointStopMidWrite(executor, `proc${i}`, c);
    }, 60_000);
});

describeWithDocker('a checkpoint-stop meeting an unmarked task mid-write (Docker)', (engine) => {
  for (const [i, c] of [...TORN, FINISHES].entries())
    it(`${c.name}: resumes from ${resumesFrom(c)}`, async () => {
      const executor = new DockerExecutor({ docker: engine.docker, instanceId: `local-torn-${i}` });
      await checkpointStopMidWrite(executor, `dock${i}`, c, { image: BASE_IMAGE });
    }, 90_000);
});
