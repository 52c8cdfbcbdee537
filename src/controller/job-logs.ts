import { Readable } from 'node:stream';
import { parseTaskLogKey, taskLogPrefix } from '../protocol/object-keys.js';
import type { ObjectStore } from '../storage/object-store.js';

/**
 * A job's task output as workers store it (`logs/<job>/…`): one part per run of a task, in start order, each either
 * one object (workers before segments) or a sequence of segments. Read whole (`fleetwise logs`), or part by part
 * from a byte offset, so a follower fetches only what is new however long the log has grown.
 */

export interface JobLogPart {
  /** The run's name, as its header shows it: `<start ms>-<task>-<instance>.log`. */
  readonly name: string;
  readonly sizeBytes: number;
}

export interface JobLogReader {
  parts(): Promise<JobLogPart[]>;
  /** Up to `maxBytes` of a part from byte `fromByte` on (empty past its end); undefined when there is no such part. */
  readPart(name: string, fromByte: number, maxBytes: number): Promise<Buffer | undefined>;
  /** Every part, each headed `==> name <==` and ending with a newline, streamed: what `fleetwise logs` prints. */
  text(): Promise<Readable>;
}

interface StoredObject {
  readonly key: string;
  readonly sizeBytes: number;
}

interface StoredRun {
  readonly name: string;
  /** Its objects in output order. */
  readonly objects: readonly StoredObject[];
}

const NEWLINE = 0x0a;

export class StoredJobLogs implements JobLogReader {
  constructor(
    private readonly store: ObjectStore,
    private readonly jobId: string,
  ) {}

  async parts(): Promise<JobLogPart[]> {
    return (await this.runs()).map((run) => ({
      name: run.name,
      sizeBytes: run.objects.reduce((sum, o) => sum + o.sizeBytes, 0),
    }));
  }

  async readPart(name: string, fromByte: number, maxBytes: number): Promise<Buffer | undefined> {
    // Only this run's objects are listed (its key and its segments share the prefix): a follower asks every few
    // seconds, and a job may have many runs.
    const run = (await this.runs(`${taskLogPrefix(this.jobId)}${name}`)).find((r) => r.name === name);
    if (run === undefined) return undefined;
    const parts: Buffer[] = [];
    let size = 0;
    let offset = 0;
    for (const object of run.objects) {
      if (size >= maxBytes) break;
      const end = offset + object.sizeBytes;
      // Sealed segments never change; only the last object may have grown since the listing (read as it is now).
      if (end > fromByte || object === run.objects[run.objects.length - 1]) {
        const body = await this.readRange(object.key, Math.max(0, fromByte - offset), maxBytes - size);
        parts.push(body);
        size += body.length;
      }
      offset = end;
    }
    return Buffer.concat(parts);
  }

  async text(): Promise<Readable> {
    const runs = await this.runs();
    const store = this.store;
    async function* body(): AsyncGenerator<Buffer> {
      for (const run of runs) {
        yield Buffer.from(`==> ${run.name} <==\n`);
        let last: number | undefined;
        for (const object of run.objects)
          for await (const chunk of await store.get(object.key)) {
            const bytes = chunk as Buffer;
            if (bytes.length === 0) continue;
            last = bytes[bytes.length - 1];
            yield bytes;
          }
        if (last !== undefined && last !== NEWLINE) yield Buffer.from('\n');
      }
    }
    return Readable.from(body(), { objectMode: false });
  }

  /**
   * The job's runs in name (start) order. A run stored both ways (a task adopted by an upgraded worker, which ships
   * it again from its start as segments) is read from its segments.
   */
  private async runs(prefix = taskLogPrefix(this.jobId)): Promise<StoredRun[]> {
    const whole = new Map<string, StoredObject>();
    const segmented = new Map<string, { seq: number; object: StoredObject }[]>();
    for await (const info of this.store.list(prefix)) {
      const parsed = parseTaskLogKey(this.jobId, info.key);
      const object = { key: info.key, sizeBytes: info.sizeBytes };
      if (parsed?.kind === 'whole') whole.set(parsed.runName, object);
      else if (parsed?.kind === 'segment') {
        const segments = segmented.get(parsed.runName) ?? [];
        segments.push({ seq: parsed.seq, object });
        segmented.set(parsed.runName, segments);
      }
    }
    const names = [...new Set([...whole.keys(), ...segmented.keys()])].sort();
    return names.map((name) => {
      const segments = segmented.get(name);
      const single = whole.get(name);
      const objects =
        segments !== undefined
          ? segments.sort((a, b) => a.seq - b.seq).map((s) => s.object)
          : single === undefined
            ? []
            : [single];
      return { name, objects };
    });
  }

  /** Up to `maxBytes` of an object from `start` on, streamed past what comes before (an old run's object is big). */
  private async readRange(key: string, start: number, maxBytes: number): Promise<Buffer> {
    const parts: Buffer[] = [];
    let skip = start;
    let size = 0;
    const stream = await this.store.get(key);
    try {
      for await (const chunk of stream) {
        let bytes = chunk as Buffer;
        if (skip >= bytes.length) {
          skip -= bytes.length;
          continue;
        }
        bytes = bytes.subarray(skip, skip + maxBytes - size);
        skip = 0;
        parts.push(bytes);
        size += bytes.length;
        if (size >= maxBytes) break;
      }
    } finally {
      stream.destroy();
    }
    return Buffer.concat(parts);
  }
}
