import type { ObjectStore } from '../storage/object-store.js';
import {
  parseTaskLogKey,
  taskLogRunName,
  taskLogRunPrefix,
  taskLogSegmentKey,
} from '../protocol/object-keys.js';
import type { Executor, LogPosition } from './executor.js';

/**
 * A sealed segment holds at least this much output: big enough that a multi-day log is a few hundred objects, small
 * enough that rewriting the open one as it grows costs little.
 */
export const LOG_SEGMENT_BYTES = 1024 * 1024;

/** The run whose output is shipped: a task's start (a new start is a new run, with a shipper of its own). */
export interface TaskLogRun {
  readonly jobId: string;
  readonly taskId: string;
  readonly startedAtMs: number;
}

interface ShippingState {
  readonly runName: string;
  /** The open segment: rewritten as output arrives, sealed (never written again) once it holds segmentBytes. */
  seq: number;
  tail: Buffer;
  /** How far into the task's output the stored segments reach. */
  position: LogPosition;
  /** Some segment of this run is in the store. */
  stored: boolean;
}

/**
 * Ships one run's output to `logs/<job>/…` as segments (object-keys.ts), reading from the executor only what is past
 * the stored part: traffic and memory follow what is new, not the log's size. Nothing is persisted on the worker:
 * what is stored is the record, so a restarted worker lists the run's segments and goes on where they end, and a
 * segment whose store failed is simply written again. The open segment is the only one rewritten, each time with
 * what it held plus what is new, so a reader never sees output go missing.
 */
export class TaskLogShipper {
  private state: ShippingState | undefined;

  constructor(
    private readonly store: ObjectStore,
    private readonly executor: Executor,
    private readonly run: TaskLogRun,
    /** Read when the run is first stored: the agent may re-register meanwhile. */
    private readonly instanceId: () => string | undefined,
    private readonly segmentBytes: number = LOG_SEGMENT_BYTES,
    /** Where a worker before this one had got (its task record): its executor note saves reading from the start. */
    private readonly saved?: LogPosition | undefined,
  ) {
    if (!(segmentBytes >= 1)) throw new Error(`a log segment holds at least a byte, got ${segmentBytes}`);
  }

  /** How far the stored segments reach, with the executor's note (undefined before the first ship). */
  get position(): LogPosition | undefined {
    return this.state?.position;
  }

  /**
   * Store the output not stored yet, until none is left or `budgetBytes` were stored; returns how many were. Without a
   * budget it is the run's last ship (a stop, an exit): a run that wrote nothing then stores an empty segment, so
   * every run leaves its part (`fleetwise logs` heads it, and a run is seen to have happened).
   */
  async ship(budgetBytes = Number.POSITIVE_INFINITY): Promise<number> {
    const state = (this.state ??= await this.resume());
    let shipped = 0;
    while (shipped < budgetBytes) {
      const chunk = await this.executor
        .readLogs(this.run.taskId, state.position, this.segmentBytes - state.tail.length)
        // The executor has no output to give (the task removed, its log unreadable): nothing more to ship, as ever.
        .catch(() => undefined);
      if (chunk === undefined) break;
      if (chunk.data.length === 0) {
        state.position = chunk.next;
        break;
      }
      const segment = Buffer.concat([state.tail, chunk.data]);
      await this.store.put(taskLogSegmentKey(this.run.jobId, state.runName, state.seq), segment);
      state.stored = true;
      shipped += chunk.data.length;
      state.position = chunk.next;
      if (segment.length >= this.segmentBytes) {
        state.seq += 1;
        state.tail = Buffer.alloc(0);
      } else state.tail = segment;
    }
    if (!state.stored && budgetBytes === Number.POSITIVE_INFINITY) {
      await this.store.put(taskLogSegmentKey(this.run.jobId, state.runName, 0), Buffer.alloc(0));
      state.stored = true;
    }
    return shipped;
  }

  /** Where the stored segments of this run end (none stored: a new run, named with this instance). */
  private async resume(): Promise<ShippingState> {
    const { jobId, taskId, startedAtMs } = this.run;
    const runs = new Map<string, { seq: number; key: string; sizeBytes: number }[]>();
    for await (const info of this.store.list(taskLogRunPrefix(jobId, taskId, startedAtMs))) {
      const parsed = parseTaskLogKey(jobId, info.key);
      // A single object is a worker before segments shipping this run: it is shipped again from the start.
      if (parsed?.kind !== 'segment') continue;
      const segments = runs.get(parsed.runName) ?? [];
      segments.push({ seq: parsed.seq, key: info.key, sizeBytes: info.sizeBytes });
      runs.set(parsed.runName, segments);
    }
    const [stored] = runs.entries();
    if (stored === undefined)
      return {
        runName: taskLogRunName(taskId, startedAtMs, this.instanceId() ?? 'unknown'),
        seq: 0,
        tail: Buffer.alloc(0),
        position: { bytes: 0 },
        stored: false,
      };
    const [runName, segments] = stored;
    segments.sort((a, b) => a.seq - b.seq);
    const last = segments[segments.length - 1];
    if (last === undefined) throw new Error('unreachable: a stored run has a segment');
    const sealedBytes = segments.slice(0, -1).reduce((sum, s) => sum + s.sizeBytes, 0);
    if (last.sizeBytes >= this.segmentBytes)
      return {
        runName,
        seq: last.seq + 1,
        tail: Buffer.alloc(0),
        position: this.resumedAt(sealedBytes + last.sizeBytes),
        stored: true,
      };
    const tail = await this.store.getBuffer(last.key);
    return {
      runName,
      seq: last.seq,
      tail,
      position: this.resumedAt(sealedBytes + tail.length),
      stored: true,
    };
  }

  /**
   * The position of `bytes` stored: with the saved note when it was made at or before that point (the executor reads
   * from the note on and skips what lies between), else bytes alone (read from the start).
   */
  private resumedAt(bytes: number): LogPosition {
    const saved = this.saved;
    return saved?.resume !== undefined && saved.bytes <= bytes ? { bytes, resume: saved.resume } : { bytes };
  }
}
