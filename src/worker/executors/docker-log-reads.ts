import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { LogChunk, LogPosition } from '../executor.js';

/**
 * Reading a container's output from a point on, for a worker that ships only what is new.
 *
 * The Engine API has no byte offset into a container's log, only `since` (a time, inclusive) and `tail` (lines). So
 * lines are read with `timestamps: true` and a position is noted as (since S, skip N): of the lines stamped at or
 * after S, in the log's order, the first N are already shipped. That holds however many lines share a stamp, and a
 * rotated-away log file before S does not matter (a byte count from the start would no longer match). S trails the
 * newest shipped stamp by a margin because the engine stamps stdout and stderr lines in two goroutines: a line
 * stamped a moment earlier can land in the log after a later-stamped one, and `since` must not drop it. A note also
 * says how many output bytes it stands for, so one kept with the task's record a while ago still serves a restarted
 * worker: it reads from the note on and skips the bytes shipped since. Without one the log is read from its start
 * once, skipping the bytes stored as they stream by (which the engine's log rotation may have cut away).
 *
 * Each frame of the multiplexed stream (a container never has a TTY here: containerSpec) is one log line (or a part
 * of a line longer than 16 KiB), `<RFC 3339 stamp> <bytes>`; a read stops between lines, never inside one.
 */

const NS_PER_SECOND = 1_000_000_000n;
/** How much earlier than the newest shipped line a later line may be stamped (see above); generous on purpose. */
const LATE_LINE_MARGIN_NS = 5n * NS_PER_SECOND;

interface ResumeNote {
  readonly sinceNs: bigint;
  readonly skip: number;
  /** The output bytes up to the note's point: a note kept from an earlier read may lag the position it is given with. */
  readonly bytes: number;
}

function parseNote(note: string | undefined): ResumeNote | undefined {
  const match = /^(\d+):(\d+):(\d+)$/.exec(note ?? '');
  if (match?.[1] === undefined || match[2] === undefined || match[3] === undefined) return undefined;
  return { sinceNs: BigInt(match[1]), skip: Number(match[2]), bytes: Number(match[3]) };
}

function formatNote(note: ResumeNote): string {
  return `${note.sinceNs}:${note.skip}:${note.bytes}`;
}

/** Nanoseconds since the epoch of an RFC 3339 stamp as the engine writes them (nanosecond digits), or undefined. */
export function dockerTimestampNs(text: string): bigint | undefined {
  const match = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(text);
  if (match?.[1] === undefined || match[3] === undefined) return undefined;
  const ms = Date.parse(`${match[1]}${match[3]}`);
  if (Number.isNaN(ms)) return undefined;
  return BigInt(ms) * 1_000_000n + BigInt((match[2] ?? '').padEnd(9, '0'));
}

/** `since` as the engine parses it: seconds and nanoseconds. */
function sinceParam(ns: bigint): string {
  return `${ns / NS_PER_SECOND}.${String(ns % NS_PER_SECOND).padStart(9, '0')}`;
}

/** The multiplexed stream's frames (8-byte header: stream, 0, 0, 0, size BE), as they arrive. */
async function* logFrames(stream: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  let pending: Buffer = Buffer.alloc(0);
  for await (const chunk of stream) {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    let offset = 0;
    while (offset + 8 <= pending.length) {
      const size = pending.readUInt32BE(offset + 4);
      if (offset + 8 + size > pending.length) break;
      yield pending.subarray(offset + 8, offset + 8 + size);
      offset += 8 + size;
    }
    pending = pending.subarray(offset);
  }
}

/**
 * The container's log as a stream: dockerode buffers a whole log unless it follows, and following never ends, so
 * the request is made through its modem with the body left streaming.
 */
function openLogStream(docker: Docker, containerId: string, since: string | undefined): Promise<Readable> {
  return new Promise((resolve, reject) => {
    docker.modem.dial(
      {
        path: `/containers/${containerId}/logs?`,
        method: 'GET',
        isStream: true,
        statusCodes: { 200: true, 404: 'no such container', 500: 'server error' },
        options: {
          stdout: true,
          stderr: true,
          follow: false,
          timestamps: true,
          ...(since === undefined ? {} : { since }),
        },
      },
      (error, result) => (error === null ? resolve(result as Readable) : reject(error)),
    );
  });
}

/** Stamps of the lines read, the oldest dropped once further than the margin behind the newest. */
class RecentStamps {
  private stamps: bigint[] = [];
  private first = 0;
  newest: bigint | undefined;

  add(ns: bigint): void {
    this.stamps.push(ns);
    if (this.newest === undefined || ns > this.newest) this.newest = ns;
    const horizon = this.newest - LATE_LINE_MARGIN_NS;
    while (this.first < this.stamps.length && (this.stamps[this.first] ?? horizon) < horizon) this.first += 1;
    if (this.first > 4096 && this.first * 2 > this.stamps.length) {
      this.stamps = this.stamps.slice(this.first);
      this.first = 0;
    }
  }

  countFrom(sinceNs: bigint): number {
    let n = 0;
    for (let i = this.first; i < this.stamps.length; i += 1) if ((this.stamps[i] ?? -1n) >= sinceNs) n += 1;
    return n;
  }
}

/** The container's output past `from`: about `maxBytes` of it, whole lines. */
export async function readDockerLogs(
  docker: Docker,
  containerId: string,
  from: LogPosition,
  maxBytes: number,
): Promise<LogChunk> {
  // A note made at or before the position: read from it, skip its lines, then the bytes shipped since it was made.
  const parsed = from.bytes === 0 ? undefined : parseNote(from.resume);
  const note = parsed !== undefined && parsed.bytes <= from.bytes ? parsed : undefined;
  const stream = await openLogStream(
    docker,
    containerId,
    note === undefined ? undefined : sinceParam(note.sinceNs),
  );
  const parts: Buffer[] = [];
  let size = 0;
  let skipLines = note?.skip ?? 0;
  let skipBytes = from.bytes - (note?.bytes ?? 0);
  const recent = new RecentStamps();
  try {
    for await (const frame of logFrames(stream)) {
      if (size >= maxBytes) break;
      const space = frame.indexOf(0x20);
      const ns = space < 0 ? undefined : dockerTimestampNs(frame.subarray(0, space).toString('latin1'));
      if (ns === undefined) throw new Error(`container ${containerId}: a log line without a timestamp`);
      const line = frame.subarray(space + 1);
      if (skipLines > 0) skipLines -= 1;
      else if (skipBytes >= line.length) skipBytes -= line.length;
      else {
        const rest = line.subarray(skipBytes);
        skipBytes = 0;
        parts.push(rest);
        size += rest.length;
      }
      recent.add(ns);
    }
  } finally {
    stream.destroy();
  }
  // Not even the output already shipped is there (yet): nothing new, and nothing learnt about where it ends.
  if (recent.newest === undefined || skipLines > 0 || skipBytes > 0)
    return { data: Buffer.alloc(0), next: from };
  const floor = note?.sinceNs ?? 0n;
  const candidate = recent.newest - LATE_LINE_MARGIN_NS;
  const sinceNs = candidate > floor ? candidate : floor;
  const data = Buffer.concat(parts);
  return {
    data,
    next: {
      bytes: from.bytes + data.length,
      resume: formatNote({ sinceNs, skip: recent.countFrom(sinceNs), bytes: from.bytes + data.length }),
    },
  };
}
