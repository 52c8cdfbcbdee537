import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { packContext } from '../../src/cli/context-archive.js';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { buildContextKey } from '../../src/protocol/object-keys.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { readAll } from '../../src/storage/streams.js';
import type { AgentLogger } from '../../src/worker/agent-options.js';
import type { Executor, TaskLaunch } from '../../src/worker/executor.js';
import { ControllerClient } from '../../src/worker/controller-client.js';
import { launchSecretCredential } from '../../src/worker/launch-credential.js';
import { TaskLifecycle } from '../../src/worker/task-lifecycle.js';
import type { DesiredTask, HeartbeatRequest, TaskReport } from '../../src/protocol/worker-protocol.js';
import { UNREACHABLE_URL } from '../helpers/unreachable-url.js';

/**
 * What the worker agent tests share: a small fake controller speaking the real worker protocol over HTTP
 * (127.0.0.1:0), desired tasks running examples/counter/counter.sh, a logger that records, and a poll helper.
 */
export const COUNTER_CONTEXT = join(PROJECT_ROOT, 'examples', 'counter');
/** examples/counter as `fleetwise submit` uploads it, and the reference a job spec then carries. */
const COUNTER_ARCHIVE = (await packContext(COUNTER_CONTEXT)).archive;
export const COUNTER_CONTEXT_REF = buildContextKey(
  createHash('sha256').update(COUNTER_ARCHIVE).digest('hex'),
  'gzip',
);

/** Put the counter's build context where the fake controller's store is (workers run only uploaded contexts). */
export async function storeCounterContext(store: ObjectStore): Promise<void> {
  await store.put(COUNTER_CONTEXT_REF, COUNTER_ARCHIVE);
}
export const WORKER_TOKEN = 'fake-controller-instance-token-0123456789';
export const BOOTSTRAP = 'fake-controller-bootstrap-token';

export class FakeController {
  /** What the next heartbeat answers (raw JSON: may be deliberately malformed). */
  answer: unknown[] = [];
  readonly heartbeats: HeartbeatRequest[] = [];
  registrations = 0;
  private server: Server | undefined;
  url = '';

  constructor(private readonly objectStore: string) {}

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    this.url = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
  }

  async stop(): Promise<void> {
    await new Promise((resolve) => this.server?.close(resolve));
  }

  /** The newest report of a task. */
  last(taskId: string): TaskReport | undefined {
    for (let i = this.heartbeats.length - 1; i >= 0; i--) {
      const found = this.heartbeats[i]?.tasks.find((t) => t.taskId === taskId);
      if (found !== undefined) return found;
    }
    return undefined;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = JSON.parse((await readAll(req)).toString('utf8') || '{}') as unknown;
    const send = (status: number, value: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
    };
    if (req.url === '/v1/workers/register') {
      if (req.headers.authorization !== `Bearer ${BOOTSTRAP}`) return send(401, { error: 'bad token' });
      this.registrations++;
      return send(200, {
        instanceId: 'inst-1',
        workerToken: WORKER_TOKEN,
        heartbeatSeconds: 0.1,
        objectStore: this.objectStore,
      });
    }
    if (req.url === '/v1/workers/heartbeat') {
      if (req.headers.authorization !== `Bearer ${WORKER_TOKEN}`) return send(401, { error: 'bad token' });
      this.heartbeats.push(body as HeartbeatRequest);
      return send(200, { tasks: this.answer });
    }
    send(404, { error: 'no such route' });
  }
}

export function runTask(taskId: string, command: string[], env: Record<string, string> = {}): DesiredTask {
  return {
    taskId,
    jobId: taskId.replace(/\.\d+$/, ''),
    action: 'run',
    restore: false,
    launch: {
      build: { context: COUNTER_CONTEXT_REF },
      command,
      env: { STEP_SECONDS: '0.05', CHECKPOINT_SECONDS: '1', COUNT_TO: '100000', ...env },
      vcpus: 1,
      memoryGiB: 0.5,
      gpus: 0,
      shmSizeGiB: 0,
    },
    checkpoint: { signal: 'SIGTERM', timeoutSeconds: 1 },
  };
}

export class RecordingLogger implements AgentLogger {
  readonly lines: string[] = [];
  info(message: string): void {
    this.lines.push(`info ${message}`);
  }
  warn(message: string): void {
    this.lines.push(`warn ${message}`);
  }
}

export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A task running `sh -c script` (in `image` for the Docker executor), its files under `dir/<task id>/`. */
export function shellLaunch(dir: string, taskId: string, script: string, image?: string): TaskLaunch {
  return {
    taskId,
    jobId: taskId.replace(/\.\d+$/, ''),
    ...(image === undefined ? {} : { image }),
    command: ['sh', '-c', script],
    env: {},
    vcpus: 1,
    memoryGiB: 0,
    gpus: 0,
    shmSizeGiB: 0,
    checkpointDir: join(dir, taskId, 'ck'),
    progressFile: join(dir, taskId, 'progress'),
    restoring: false,
  };
}

/** A worker's task lifecycle on this host, registered with a controller it never calls (the test drives it). */
export function offlineLifecycle(
  executor: Executor,
  store: ObjectStore,
  workDir: string,
  checkpointPollMs?: number,
): TaskLifecycle {
  return new TaskLifecycle(
    {
      connection: new ControllerClient(UNREACHABLE_URL),
      credentials: { launch: launchSecretCredential('unused') },
      executor,
      openStore: () => store,
      cloudInstanceId: 'local-test',
      workDir,
      ...(checkpointPollMs === undefined ? {} : { checkpointPollMs }),
    },
    { info: () => undefined, warn: () => undefined },
    () => ({ store, instanceId: 'inst-1' }),
    new AbortController().signal,
  );
}

/** A task running `script` in `sh -c`, attempt 1, checkpoint-stopped by SIGTERM; `launch` overrides its launch. */
export function shellTask(
  taskId: string,
  script: string,
  extra: Partial<DesiredTask> = {},
  launch: Partial<DesiredTask['launch']> = {},
): DesiredTask {
  return {
    taskId,
    jobId: taskId.replace(/\.\d+$/, ''),
    action: 'run',
    restore: false,
    attempt: 1,
    launch: {
      command: ['sh', '-c', script],
      env: {},
      vcpus: 1,
      memoryGiB: 0,
      gpus: 0,
      shmSizeGiB: 0,
      ...launch,
    },
    checkpoint: { signal: 'SIGTERM', timeoutSeconds: 5 },
    ...extra,
  };
}

/** Observe the tasks until `taskId` leaves `running`. */
export async function untilTaskEnded(tasks: TaskLifecycle, taskId: string): Promise<void> {
  await until(`${taskId} to end`, async () => {
    await tasks.observe();
    await tasks.settle();
    return tasks.get(taskId)?.phase !== 'running' || undefined;
  });
}
