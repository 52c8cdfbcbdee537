import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { readLocalInstances } from '../../src/cloud/local/instance-file.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import Database from 'better-sqlite3';
import { z } from 'zod';
import { afterAll, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { Rng } from '../../src/core/random.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { createS3Client, S3ObjectStore } from '../../src/storage/s3-store.js';
import { checkpointKeys } from '../../src/protocol/object-keys.js';
import { extractCheckpoint } from '../../src/worker/archives.js';
import { checkpointManifestSchema, listCheckpoints } from '../../src/worker/checkpoints.js';
import { readExitRecord } from '../../src/worker/exit-record.js';
import { ensureBuiltCli } from '../helpers/built-cli.js';
import {
  analyzeJob,
  describeRuns,
  parseMarks,
  type Restart,
  type Run,
  type WorkerKill,
} from '../helpers/chaos-marks.js';
import {
  killLocalLeftovers,
  startLocalController,
  taskAlive,
  taskPid,
  workerAlive,
  type LocalInstanceRecord,
  type StartedController,
} from '../helpers/local-controller.js';
import { freePort } from '../helpers/test-ports.js';
import { describeWithMoto, TEST_CREDENTIALS, TEST_REGION } from '../helpers/moto.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * Chaos in local mode with real processes (`fleetwise controller --provider local --executor process`, its worker
 * processes, the tasks), checkpoints and logs in S3 (moto_server behind test/helpers/tcp-proxy.ts): 50 checkpointing
 * jobs run while the controller is SIGKILLed 20 times (and restarted on its state) and 5 workers are SIGKILLed at
 * seeded random times, and the object store refuses every connection for 60 s and then hangs for 15 s. Every job must
 * succeed once; no two runs of a job may execute at once; no instance, worker or task process may be left; and each
 * restart must resume from the newest checkpoint in the store when its worker died, or a newer one (read from the
 * store after each kill, compared with the marks each task leaves, test/helpers/chaos-marks.ts).
 *
 * CHAOS_SEED picks another schedule; CHAOS_KEEP=1 keeps the run's directory.
 */

const SEED = Number(process.env['CHAOS_SEED'] ?? 15);
const JOBS = 50;
const CONTROLLER_KILLS = 20;
const WORKER_KILLS = 5;
const STEP_SECONDS = 0.25;
const CHECKPOINT_SECONDS = 2;
/**
 * Work per job, in iterations of STEP_SECONDS: 45 to 120 s, so jobs run through the kills and end at different times.
 * The longest also waits for the schedule to end (a controller restarting in 5–16 s on a loaded host made the 20 kills
 * outlast 120 s of work).
 */
const MIN_ITERATIONS = 180;
const MAX_ITERATIONS = 480;
/**
 * The controller is killed this long after it is back (its API answers), so it gets to run between kills and dies at
 * every stage: recovering, mid-round, mid-reconcile, between passes. The 20 kills take about 20 × (restart + 1.65 s).
 */
const CONTROLLER_UPTIME_SECONDS: readonly [number, number] = [0.3, 3];
/**
 * When the workers are killed, in seconds after tasks run (TASKS_RUNNING_INSTANCES), and before the object store
 * goes down (a task whose worker dies while no checkpoint can be uploaded loses the work done since the store went
 * down, more than a checkpoint interval, and through no fault of the system). The window ends 7 s before the outage,
 * so the last checkpoint before a kill has time to reach the store on a slow host (with kills up to 22 s, three tasks
 * killed 3 s before the outage on a host running the engine 1.7× slower than usual redid 5.3–5.9 s).
 */
const WORKER_KILL_WINDOW: readonly [number, number] = [4, 18];
/** The store's schedule and the worker kills start once tasks run on this many instances. */
const TASKS_RUNNING_INSTANCES = 5;
/** The object store refuses every connection (nothing listens) for 60 s, from this many seconds after tasks run. */
const OUTAGE_AT_SECONDS = 25;
const OUTAGE_SECONDS = 60;
/** Then it hangs for 15 s: connections are taken and never answered, open ones freeze mid-transfer. */
const HANG_AT_SECONDS = 90;
const HANG_SECONDS = 15;
const BUCKET = 'fleetwise-chaos';
/**
 * What a restart may redo is checked exactly: the work since the newest checkpoint that was in the store when the
 * worker died (read from the store after each kill), nothing more. How old that checkpoint is depends on the host
 * as much as on fleetwise: a checkpoint counts once the worker has uploaded it, and fifty tasks uploading to one
 * moto_server while the other forty-five start (the kills fall in that storm) took up to 9 s on a 2-core CI host
 * running other test files. So the redone work itself has only this bound, which a worker that stopped uploading
 * its tasks' periodic checkpoints would break (tasks run 45–120 s, most of it before the kills).
 */
const LOST_WORK_BOUND_SECONDS = 10 * CHECKPOINT_SECONDS;
/**
 * A worker silent this long is replaced: short, so a killed worker's tasks move on quickly, but not shorter. Workers
 * heartbeat every 0.5 s, and with fifty tasks, their workers and the controller on two cores beside other test files,
 * a heartbeat's round trip reaches 2.2 s (FLEETWISE_LOG_LEVEL=debug logs each): a 2 s timeout replaced healthy
 * workers, whose tasks then redid the work since their last checkpoint. At 3 s, one run of the whole suite on such a
 * host replaced thirteen healthy workers within a second, 30 s after the store came back (the summary prints what
 * such workers logged before: whether their heartbeats went out late or were answered late).
 */
const HEARTBEAT_TIMEOUT_SECONDS = 4;
const RUN_DEADLINE_MS = 420_000;

/** The counter example's contract plus marks (test/helpers/chaos-marks.ts). */
const script = join(PROJECT_ROOT, 'test', 'fixtures', 'chaos-task.sh');
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-chaos-'));
const stateDir = join(scratch, 'state');
const marksDir = join(scratch, 'marks');
/** Created once the schedule is over: the held job finishes then. */
const holdFile = join(scratch, 'schedule-over');

/** Every run of every job's task so far, from the marks the tasks leave. */
function allRuns(): Run[] {
  return (existsSync(marksDir) ? readdirSync(marksDir) : []).flatMap(
    (file) => parseMarks(readFileSync(join(marksDir, file), 'utf8')).runs,
  );
}

/** Instances where a run of some job's task has started and not ended. */
function instancesRunningTasks(): Set<string> {
  return new Set(allRuns().flatMap((run) => (run.end === undefined ? [run.instance] : [])));
}

/** The tasks whose runs on `instance` have started and not ended. */
function tasksRunningOn(instance: string): string[] {
  return allRuns().flatMap((run) =>
    run.instance === instance && run.end === undefined ? [taskOfRun(run.id)] : [],
  );
}

/** Runs of some job's task on `instance` that have finished. */
function runsFinishedOn(instance: string): Run[] {
  return allRuns().filter((run) => run.instance === instance && run.end?.kind === 'finished');
}

/** A run id is `<task>/<attempt>/<instance>/<pid>`. */
function taskOfRun(runId: string): string {
  return runId.split('/')[0] ?? runId;
}

function attemptOfRun(runId: string): number {
  return Number(runId.split('/')[1]);
}

/** The checkpoint and exit-record reference of a task (`<job>.<index>`). */
function taskRef(taskId: string): { jobId: string; taskId: string } {
  return { jobId: taskId.slice(0, taskId.lastIndexOf('.')), taskId };
}

/** The runs among `runs` whose exit is not in the store: their worker could not have reported it. */
async function unrecordedExits(store: ObjectStore, runs: readonly Run[]): Promise<string[]> {
  const missing: string[] = [];
  for (const run of runs)
    if ((await readExitRecord(store, taskRef(taskOfRun(run.id)), attemptOfRun(run.id))) === undefined)
      missing.push(run.id);
  return missing;
}

/** The newest checkpoint of a task whose worker the test killed, as it stood in the store after the kill. */
interface DurableAtKill {
  readonly taskId: string;
  readonly killCs: number;
  readonly seq: number | undefined;
  /** The counter the checkpoint holds: where the task's next run must resume, at the least. */
  readonly counter: number;
}

/**
 * The newest complete checkpoint the killed worker left (manifest written before the kill: a later run's are
 * newer), and the counter in it.
 */
async function durableCheckpoint(
  store: ObjectStore,
  taskId: string,
  kill: { readonly cs: number; readonly unixMs: number },
): Promise<DurableAtKill> {
  const ref = taskRef(taskId);
  const complete = (await listCheckpoints(store, ref)).filter((c) => c.complete).reverse();
  for (const { seq } of complete) {
    const keys = checkpointKeys(ref, seq);
    const manifest = checkpointManifestSchema.parse(
      JSON.parse((await store.getBuffer(keys.manifest)).toString()),
    );
    if (Date.parse(manifest.createdAt) > kill.unixMs) continue;
    const dir = mkdtempSync(join(scratch, 'durable-'));
    try {
      const archive = join(dir, 'data.tar');
      writeFileSync(archive, await store.getBuffer(keys.data));
      mkdirSync(join(dir, 'files'));
      await extractCheckpoint(archive, join(dir, 'files'));
      const counter = Number(readFileSync(join(dir, 'files', 'counter'), 'utf8').trim());
      return { taskId, killCs: kill.cs, seq, counter };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return { taskId, killCs: kill.cs, seq: undefined, counter: 0 };
}

/**
 * moto_server, busy with fifty workers' uploads, now and then answers a listing with a 500 (its own error page): read
 * again, a second apart, before counting it as the test's failure.
 */
async function readPersistently<T>(read: () => Promise<T>, attempts = 5): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await read();
    } catch (e) {
      if (attempt >= attempts) throw e;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

let ctl: StartedController | undefined;

afterAll(async () => {
  if (ctl !== undefined && ctl.process.exitCode === null && ctl.process.signalCode === null) {
    ctl.process.kill('SIGKILL');
    await ctl.exited;
  }
  killLocalLeftovers(stateDir);
  // CHAOS_KEEP=1 keeps the state, the workers' logs and the marks to look into.
  if (process.env['CHAOS_KEEP'] === undefined)
    rmSync(scratch, { recursive: true, force: true, maxRetries: 5 });
  else process.stderr.write(`[chaos] kept ${scratch}\n`);
});

/**
 * What the controller recorded about a job (its state changes, its instances' worker losses): enough to tell a move
 * from a lost worker from a cancel when a run ended early.
 */
function controllerView(jobName: string): string {
  try {
    const rows = queryState(
      `SELECT e.at_seconds AS at, e.kind AS kind, e.message AS message FROM events e
       WHERE e.kind <> 'task.checkpoint' AND (e.job_id = (SELECT id FROM jobs WHERE name = ?)
         OR (e.kind = 'instance.worker-lost' AND e.instance_id IN (SELECT instance_id FROM events
           WHERE job_id = (SELECT id FROM jobs WHERE name = ?) AND instance_id IS NOT NULL)))
       ORDER BY e.seq`,
      jobName,
      jobName,
    ) as { at: number; kind: string; message: string | null }[];
    const lines = rows.map((r) => `${r.at.toFixed(2)} ${r.kind}: ${(r.message ?? '').slice(0, 160)}`);
    const offset = Date.now() / 1000 - uptimeCs() / 100;
    return `\n    controller (unix time; the marks' t = unix − ${offset.toFixed(2)}):\n      ${lines.join('\n      ')}`;
  } catch (e) {
    return `\n    controller: state unreadable (${(e as Error).message})`;
  }
}

/** Rows of `sql` on the controller's state, read-only beside the running controller. */
function queryState(sql: string, ...params: string[]): unknown[] {
  const db = new Database(join(stateDir, 'state.db'), { readonly: true, fileMustExist: true });
  try {
    return db.prepare(sql).all(...params);
  } finally {
    db.close();
  }
}

/**
 * Instances (cloud ids) whose worker the controller declared lost though the run did not kill it, with when (unix
 * seconds): a healthy worker replaced, its tasks rerun from their last checkpoints (printed in the summary; the
 * redone-work bound catches a costly one).
 */
function replacedUnkilled(killed: ReadonlySet<string>): { cloudId: string; lostAt: number }[] {
  const rows = queryState(
    `SELECT i.cloud_id AS cloudId, MIN(e.at_seconds) AS lostAt FROM events e JOIN instances i ON i.id = e.instance_id
     WHERE e.kind = 'instance.worker-lost' AND i.cloud_id IS NOT NULL GROUP BY i.cloud_id ORDER BY lostAt`,
  ) as { cloudId: string; lostAt: number }[];
  return rows.filter((r) => !killed.has(r.cloudId));
}

const workerLogLineSchema = z.object({ time: z.number(), msg: z.string(), ms: z.number().optional() });

/**
 * What each worker replaced without being killed logged in the seconds before the controller declared it lost (the
 * test runs workers at debug level: every heartbeat's round trip, every failure): whether its heartbeats stopped
 * going out (a tick stuck on this host) or went out and were answered late (the controller, the host's load).
 */
function falseLossLogs(replaced: readonly { cloudId: string; lostAt: number }[]): string {
  const dirs = new Map(instances().map((i) => [i.instanceId, i.dir]));
  return replaced
    .map(({ cloudId, lostAt }) => {
      const file = join(dirs.get(cloudId) ?? '', 'worker.log');
      if (!existsSync(file)) return `${cloudId}: no worker.log`;
      const lines = readFileSync(file, 'utf8')
        .split('\n')
        .flatMap((line) => {
          try {
            const parsed = workerLogLineSchema.safeParse(JSON.parse(line));
            return parsed.success ? [parsed.data] : [];
          } catch {
            return [];
          }
        })
        .filter((l) => l.time / 1000 >= lostAt - 8 && l.time / 1000 <= lostAt + 1)
        .map(
          (l) =>
            `${(l.time / 1000 - lostAt).toFixed(2)} s ${l.msg}${l.ms === undefined ? '' : ` (${l.ms} ms)`}`,
        );
      return `${cloudId}, lost at ${lostAt.toFixed(2)} (its log from 8 s before):\n      ${lines.join('\n      ')}`;
    })
    .join('\n    ');
}

/** Centiseconds of /proc/uptime: the clock the tasks' marks use. */
function uptimeCs(): number {
  return Math.round(Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 100);
}

function instances(): LocalInstanceRecord[] {
  return readLocalInstances(join(stateDir, 'local-instances.json'));
}

/** Every process a local instance may have left: its worker and the tasks' process groups. */
async function leftoverProcesses(): Promise<string[]> {
  const left: string[] = [];
  for (const i of instances()) {
    if (workerAlive(i)) left.push(`worker of ${i.instanceId} (pid ${i.pid})`);
    const executor = join(i.dir, 'executor');
    if (existsSync(executor))
      for (const task of readdirSync(executor))
        if (await taskAlive(i.dir, task))
          left.push(`task ${task} on ${i.instanceId} (pid ${taskPid(i.dir, task)})`);
  }
  return left;
}

interface JobView {
  readonly id: string;
  readonly name: string;
  readonly state: string;
}

async function jobs(current: StartedController): Promise<JobView[] | undefined> {
  const answer = await current.api('GET', '/v1/jobs').catch(() => undefined);
  return answer?.status === 200 ? (answer.json as { jobs: JobView[] }).jobs : undefined;
}

interface ChaosPlan {
  /** Seconds the controller runs before each kill: the first counted from the submissions, the others from a restart. */
  readonly controllerUptimes: readonly number[];
  /** Seconds after the submissions, ascending. */
  readonly workerKills: readonly number[];
}

function chaosPlan(rng: Rng): ChaosPlan {
  const [upLo, upHi] = CONTROLLER_UPTIME_SECONDS;
  const [workerLo, workerHi] = WORKER_KILL_WINDOW;
  return {
    controllerUptimes: Array.from({ length: CONTROLLER_KILLS }, () => rng.uniform(upLo, upHi)),
    workerKills: Array.from({ length: WORKER_KILLS }, () => rng.uniform(workerLo, workerHi)).sort(
      (a, b) => a - b,
    ),
  };
}

describeWithMoto(
  'chaos: a 50-job local run through SIGKILLs, an object-store outage and a hung store',
  (moto) => {
    let store: TcpProxy | undefined;
    afterAll(async () => {
      await store?.close();
    });

    it('every job succeeds once, no run overlaps another, nothing is left, a restart resumes from the newest checkpoint in the store', async () => {
      ensureBuiltCli();
      const rng = new Rng(SEED);
      mkdirSync(marksDir, { recursive: true });
      // S3 (moto_server) behind a proxy the run switches down, then to hanging, then back.
      await createS3Client(moto.clientOptions).send(new CreateBucketCommand({ Bucket: BUCKET }));
      const proxy = await startTcpProxy(moto.endpoint);
      store = proxy;
      const port = await freePort();
      const config = [
        `workerHeartbeatTimeoutSeconds: ${HEARTBEAT_TIMEOUT_SECONDS}`,
        `objectStore: s3://${BUCKET}/chaos`,
      ];
      const env = {
        AWS_ENDPOINT_URL_S3: proxy.url,
        AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
        AWS_REGION: TEST_REGION,
        AWS_EC2_METADATA_DISABLED: 'true',
        // Every heartbeat in the workers' logs (and the controller's log in the run's directory), for a failure.
        FLEETWISE_LOG_LEVEL: 'debug',
      };
      const start = (): Promise<StartedController> =>
        startLocalController(stateDir, { port, config, env, logFile: join(scratch, 'controller.log') });
      let current = await start();
      ctl = current;

      const iterations = new Map<string, number>();
      for (let i = 0; i < JOBS; i += 1)
        iterations.set(
          `chaos-${String(i).padStart(2, '0')}`,
          MIN_ITERATIONS + rng.int(MAX_ITERATIONS - MIN_ITERATIONS + 1),
        );
      // The longest job waits, counted out, until the schedule is over: however slowly the controller restarts on a
      // loaded host, every kill and every change of the store falls while jobs run.
      const held = [...iterations].reduce((a, b) => (b[1] > a[1] ? b : a))[0];
      // Sent all at once: one after another, each waited for the early round the one before it asked for (a second
      // or two on a loaded host), which made the submissions a minute and a half of the run on their own.
      const submit = async ([name, count]: [string, number]): Promise<void> => {
        const answer = await current.api('POST', '/v1/jobs', {
          name,
          team: 'chaos',
          tasks: [
            {
              image: 'busybox',
              command: ['sh', script],
              env: {
                COUNT_TO: count,
                STEP_SECONDS: String(STEP_SECONDS),
                CHECKPOINT_CS: CHECKPOINT_SECONDS * 100,
                MARK_FILE: join(marksDir, `${name}.log`),
                ...(name === held ? { HOLD_FILE: holdFile } : {}),
              },
              demand: { any: [0, 0.25, 0.125] },
              shmSizeGiB: 0.0625,
            },
          ],
          checkpoint: {
            signal: 'SIGTERM',
            timeoutSeconds: 10,
            everySeconds: CHECKPOINT_SECONDS,
            restoreDelaySeconds: 1,
            initDelaySeconds: 1,
          },
          totalIterations: count,
          expectedDurationSeconds: Math.ceil(count * STEP_SECONDS),
        });
        expect(answer.status, answer.text).toBe(201);
      };
      await Promise.all([...iterations].map(submit));

      const plan = chaosPlan(rng);
      const kills: WorkerKill[] = [];
      const directStore = new S3ObjectStore(createS3Client(moto.clientOptions), BUCKET, 'chaos/');
      const durableReads: Promise<DurableAtKill[]>[] = [];
      const exitReads: Promise<string[]>[] = [];
      const log: string[] = [];
      const startedMs = Date.now();
      const seconds = (): number => (Date.now() - startedMs) / 1000;
      const elapsed = (): string => `${seconds().toFixed(1)} s`;
      // The store's outage and the worker kills are timed from when tasks run (a controller killed early may take a
      // while to launch fifty workers), so that they hit running tasks, not a cluster still starting.
      let tasksRunningMs: number | undefined;
      const sinceTasksRun = (): number =>
        tasksRunningMs === undefined ? Number.NEGATIVE_INFINITY : (Date.now() - tasksRunningMs) / 1000;
      let lastWorkerKillMs = 0;
      let controllerKills = 0;
      let nextControllerKillMs = startedMs + (plan.controllerUptimes[0] ?? 0) * 1000;
      const workerKills = [...plan.workerKills];
      // The store's schedule: down, hung, back.
      const storeModes: { readonly at: number; readonly mode: 'refuse' | 'hang' | 'pass' }[] = [
        { at: OUTAGE_AT_SECONDS, mode: 'refuse' },
        { at: HANG_AT_SECONDS, mode: 'hang' },
        { at: HANG_AT_SECONDS + HANG_SECONDS, mode: 'pass' },
      ];
      if (OUTAGE_AT_SECONDS + OUTAGE_SECONDS > HANG_AT_SECONDS)
        throw new Error('the outage overlaps the hang');
      let done: JobView[] | undefined;
      let lastPollMs = 0;
      // Nothing the loop waits for may hold up the schedule: a controller's restart and the job polls (a controller
      // launching fifty instances answers slowly on a loaded host) run in the background while the store's modes and
      // the worker kills keep their times.
      let restarting: Promise<void> | undefined;
      let scheduleOver = false;
      let polling: Promise<void> | undefined;
      while (Date.now() - startedMs < RUN_DEADLINE_MS && done === undefined) {
        if (
          restarting === undefined &&
          controllerKills < CONTROLLER_KILLS &&
          Date.now() >= nextControllerKillMs
        ) {
          current.process.kill('SIGKILL');
          await current.exited;
          controllerKills += 1;
          log.push(`${elapsed()} SIGKILL controller (${controllerKills})`);
          restarting = start().then((started) => {
            current = started;
            ctl = started;
            log.push(`${elapsed()} controller back`);
            nextControllerKillMs = Date.now() + (plan.controllerUptimes[controllerKills] ?? 0) * 1000;
            restarting = undefined;
          });
          continue;
        }
        if (tasksRunningMs === undefined && instancesRunningTasks().size >= TASKS_RUNNING_INSTANCES) {
          tasksRunningMs = Date.now();
          log.push(
            `${elapsed()} tasks run on ${TASKS_RUNNING_INSTANCES} instances: the store's schedule starts`,
          );
        }
        const storeMode = storeModes[0];
        if (storeMode !== undefined && sinceTasksRun() >= storeMode.at) {
          storeModes.shift();
          // A hang freezes the connections open at that moment too, as a store that stalls mid-transfer.
          await proxy.setMode(storeMode.mode, { freeze: storeMode.mode === 'hang' });
          log.push(
            `${elapsed()} object store ${storeMode.mode === 'pass' ? 'back' : storeMode.mode === 'hang' ? 'hangs' : 'down'}`,
          );
          continue;
        }
        const workerKill = workerKills[0];
        // One kill at a time, a second apart: a worker just killed still looks alive until it is reaped.
        if (
          workerKill !== undefined &&
          sinceTasksRun() >= workerKill &&
          Date.now() - lastWorkerKillMs > 1000
        ) {
          // A worker running a task of ours: killing an idle one would test nothing.
          const busy = instancesRunningTasks();
          const live = instances().filter(
            (i) => i.state === 'running' && workerAlive(i) && busy.has(i.instanceId),
          );
          // Nothing to kill right now (no task started yet, every worker being replaced): try at the next turn.
          if (live.length > 0) {
            workerKills.shift();
            const victim = rng.pick(live.sort((a, b) => a.instanceId.localeCompare(b.instanceId)));
            const killed = tasksRunningOn(victim.instanceId);
            const finished = runsFinishedOn(victim.instanceId);
            process.kill(victim.pid as number, 'SIGKILL');
            const kill = { cs: uptimeCs(), unixMs: Date.now() };
            kills.push({ instance: victim.instanceId, atCs: kill.cs });
            // A second later (an upload the worker had sent lands), straight from moto_server, whatever the proxy
            // does. Its tasks' next runs are seconds away (the controller notices the dead process, or the silent
            // worker, after seconds either way), and what they upload is told apart by its manifest's time.
            durableReads.push(
              new Promise((r) => setTimeout(r, 1000)).then(() =>
                Promise.all(
                  killed.map((taskId) =>
                    readPersistently(() => durableCheckpoint(directStore, taskId, kill)),
                  ),
                ),
              ),
            );
            // A task that ended on it shortly before: whether its exit reached the store before the kill (if not,
            // no one could report it, and it runs again from its last checkpoint).
            exitReads.push(
              new Promise((r) => setTimeout(r, 1000)).then(() =>
                readPersistently(() => unrecordedExits(directStore, finished)),
              ),
            );
            // Awaited after the run; a read that failed is reported there, not left unhandled meanwhile.
            durableReads.at(-1)?.catch(() => undefined);
            exitReads.at(-1)?.catch(() => undefined);
            lastWorkerKillMs = Date.now();
            log.push(`${elapsed()} SIGKILL worker of ${victim.instanceId}`);
            continue;
          }
        }
        if (
          !scheduleOver &&
          restarting === undefined &&
          controllerKills === CONTROLLER_KILLS &&
          workerKills.length === 0 &&
          storeModes.length === 0
        ) {
          writeFileSync(holdFile, '');
          scheduleOver = true;
          log.push(`${elapsed()} schedule over: the held job (${held}) may finish`);
        }
        if (restarting === undefined && polling === undefined && Date.now() - lastPollMs > 1000) {
          lastPollMs = Date.now();
          polling = jobs(current).then((list) => {
            if (list !== undefined && list.length === JOBS && list.every((j) => j.state === 'succeeded'))
              done = list;
            polling = undefined;
          });
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      await restarting;
      await polling;
      log.push(`${elapsed()} run over`);
      const summary = (): string => `${log.join('\n')}\n${current.diagnostics()}`;
      expect(
        done,
        `not every job succeeded in time:\n${JSON.stringify(await jobs(current))}\n${summary()}`,
      ).toBeDefined();
      // No instance is left: the controller terminates what no job needs, and every process is gone.
      await until(
        'every instance terminated and every worker and task process gone',
        async () =>
          instances().every((i) => i.state === 'terminated') && (await leftoverProcesses()).length === 0,
        30_000,
        async () =>
          `${JSON.stringify(instances().filter((i) => i.state !== 'terminated'))}\n${(await leftoverProcesses()).join('\n')}\n${summary()}`,
      );

      // None ran twice, none finished twice, no restart resumed from a checkpoint older than the store held.
      const problems: string[] = [];
      // Every kill happened while the jobs ran (the held job waits for the schedule to end).
      if (controllerKills !== CONTROLLER_KILLS)
        problems.push(
          `the controller was killed ${controllerKills} times of ${CONTROLLER_KILLS} before the jobs ended`,
        );
      if (kills.length !== WORKER_KILLS)
        problems.push(`workers were killed ${kills.length} times of ${WORKER_KILLS} before the jobs ended`);
      if (storeModes.length > 0)
        problems.push(`the jobs ended before the store's schedule did (${storeModes.length} changes left)`);
      // Each killed worker's tasks resumed from the newest checkpoint in the store, or a newer one: none lost.
      const durable = (await Promise.all(durableReads)).flat();
      const everyRun = allRuns();
      for (const d of durable) {
        const next = everyRun
          .filter((r) => taskOfRun(r.id) === d.taskId && r.startCs > d.killCs)
          .sort((a, b) => a.startCs - b.startCs)[0];
        if (next === undefined) problems.push(`${d.taskId}: no run after its worker was killed`);
        else if (next.resumedAt < d.counter)
          problems.push(
            `${d.taskId}: ${next.id} resumed at ${next.resumedAt}, but checkpoint ${d.seq} in the store when its ` +
              `worker died holds ${d.counter}`,
          );
      }
      if (durable.length < WORKER_KILLS)
        problems.push(`${durable.length} tasks on the ${WORKER_KILLS} workers killed`);
      const unrecorded = new Set((await Promise.all(exitReads)).flat());
      const unreported: string[] = [];
      const restarts: (Restart & { readonly name: string })[] = [];
      for (const [name, count] of iterations) {
        const marks = parseMarks(readFileSync(join(marksDir, `${name}.log`), 'utf8'));
        const analysis = analyzeJob(marks, kills, unrecorded);
        if (analysis.unreportedFinishes > 0) unreported.push(`${name} ×${analysis.unreportedFinishes}`);
        const runs = `\n    ${describeRuns(marks).join('\n    ')}${controllerView(name)}`;
        if (analysis.finished !== 1) problems.push(`${name}: finished ${analysis.finished} times${runs}`);
        if (analysis.lastIteration !== count)
          problems.push(`${name}: reached ${analysis.lastIteration} of ${count} iterations${runs}`);
        if (analysis.overlaps.length > 0)
          problems.push(`${name}: runs at the same time ${JSON.stringify(analysis.overlaps)}${runs}`);
        for (const r of analysis.restarts) {
          restarts.push({ name, ...r });
          if (r.lostSeconds > LOST_WORK_BOUND_SECONDS)
            problems.push(
              `${name}: ${r.to} resumed at ${r.resumedAt} where ${r.from} had reached ${r.reached} (${r.lostSeconds} s of work redone)${runs}`,
            );
        }
      }
      // Each worker killed was running a task, so each kill made at least one task run again.
      if (restarts.length < WORKER_KILLS)
        problems.push(`${restarts.length} restarts for ${WORKER_KILLS} SIGKILLs of busy workers`);
      const maxLost = Math.max(0, ...restarts.map((r) => r.lostSeconds));
      const falselyLost = replacedUnkilled(new Set(kills.map((k) => k.instance)));
      process.stderr.write(
        `[chaos] seed ${SEED}: ${JOBS} jobs in ${elapsed()}, ${controllerKills} controller and ${kills.length} worker SIGKILLs; ` +
          `workers replaced that the run did not kill: ${falselyLost.map((r) => r.cloudId).join(', ') || 'none'}; ` +
          `${restarts.length} restarts (finishes no one could report: ${unreported.join(', ') || 'none'}), work redone per restart ≤ ${maxLost.toFixed(2)} s (checkpoints every ${CHECKPOINT_SECONDS} s, ` +
          `bound ${LOST_WORK_BOUND_SECONDS} s); the newest checkpoint in the store at each kill held ` +
          `${durable.map((d) => `${d.taskId} ${d.counter}`).join(', ')}: ` +
          `${restarts.map((r) => `${r.name} ${r.lostSeconds.toFixed(2)} s after ${r.from} → ${r.to}`).join(', ')}\n` +
          `${log.join('\n')}\n${problems.join('\n')}\n` +
          (falselyLost.length === 0 ? '' : `workers replaced unkilled:\n    ${falseLossLogs(falselyLost)}\n`),
      );
      expect(problems).toEqual([]);

      const stopping = current.process;
      stopping.kill('SIGTERM');
      expect(await current.exited).toBe(0);
    }, 540_000);
  },
);

async function until(
  what: string,
  probe: () => boolean | Promise<boolean>,
  timeoutMs: number,
  diagnostics: () => string | Promise<string>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${await diagnostics()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
