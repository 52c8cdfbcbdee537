import { open } from 'node:fs/promises';

/**
 * Task progress from FLEETWISE_PROGRESS_FILE: one line `<unix seconds> <iterations completed>` per report, appended
 * by the task (examples/helpers/ has Python and Node helpers). Iterations are cumulative over the job's life (a
 * resumed task continues from its checkpoint's count). Throughput is measured over a sliding window, 300 s by default
 * as in Eva's iterator wrapper (digest §1 ThroughputMonitor, `sample_duration=300`; "Throughput window | 300 s").
 */
export const DEFAULT_THROUGHPUT_WINDOW_SECONDS = 300;

export interface ProgressSample {
  readonly timeSeconds: number;
  readonly iterations: number;
}

export interface ParsedProgress {
  readonly samples: ProgressSample[];
  /** Lines that did not parse (skipped, counted for diagnostics). */
  readonly malformedLines: number;
  /** Bytes at the end without a newline yet (a line the task is still writing). */
  readonly remainder: string;
}

const LINE = /^\s*(\d+(?:\.\d+)?)\s+(\d+)\s*$/;

/** Parse complete lines; a trailing line without its newline is returned as `remainder`, not parsed. */
export function parseProgress(text: string): ParsedProgress {
  const lines = text.split('\n');
  const remainder = lines.pop() ?? '';
  const samples: ProgressSample[] = [];
  let malformedLines = 0;
  for (const line of lines) {
    if (line.trim() === '') continue;
    const m = LINE.exec(line);
    if (m?.[1] === undefined || m[2] === undefined) {
      malformedLines++;
      continue;
    }
    const sample = { timeSeconds: Number(m[1]), iterations: Number(m[2]) };
    // Digits past what a double holds (`1e400` is Infinity) are no count: malformed, not a sample.
    if (!Number.isFinite(sample.timeSeconds) || !Number.isFinite(sample.iterations)) {
      malformedLines++;
      continue;
    }
    samples.push(sample);
  }
  return { samples, malformedLines, remainder };
}

export interface ProgressSummary {
  /** Iterations completed (the latest report), 0 before the first one. */
  readonly completed: number;
  readonly total: number | undefined;
  /** Iterations per second over the window, undefined until reports span half of it (see `throughput`). */
  readonly iterationsPerSecond: number | undefined;
  readonly lastReportSeconds: number | undefined;
}

/**
 * The shortest time the two samples of a rate may span, as a share of the window. Tasks stamp their lines with the
 * clock they have (`date +%s`: whole seconds), so a span of S stamped seconds is S ± 1 true ones and a rate over it is
 * off by up to 1/S: 4.7 it/s over a 1.6 s span of whole-second stamps reads 8 it/s, and the controller takes what a
 * task shows alone for its throughput alone (Eva §4.3). Half the window bounds that error by 2/window (3% over the
 * worker's 60 s), and a steady reporter whose latest line is in the window always spans it, whatever its gap: the
 * anchor before the window and the latest sample are at least one gap apart, and at least the window less one gap.
 */
export const MIN_RATE_SPAN_SHARE_OF_WINDOW = 0.5;

/**
 * Iterations per second over the last `windowSeconds` before `nowSeconds`: (last − first) / (t_last − t_first) over
 * the samples in the window, plus the last sample before it as the window's left anchor (so sparse reporters, one
 * line per few minutes, still get a rate). Undefined until those samples span MIN_RATE_SPAN_SHARE_OF_WINDOW of the
 * window. Reports going backwards (a restart from an older checkpoint) start a new series: only samples after the last
 * decrease count.
 */
export function throughput(
  samples: readonly ProgressSample[],
  nowSeconds: number,
  windowSeconds: number = DEFAULT_THROUGHPUT_WINDOW_SECONDS,
): number | undefined {
  let start = 0;
  for (let i = 1; i < samples.length; i++)
    if ((samples[i]?.iterations ?? 0) < (samples[i - 1]?.iterations ?? 0)) start = i;
  const series = samples.slice(start).filter((s) => s.timeSeconds <= nowSeconds);
  const from = nowSeconds - windowSeconds;
  let first = series.findIndex((s) => s.timeSeconds >= from);
  if (first === -1) return undefined;
  if (first > 0) first -= 1;
  const a = series[first];
  const b = series.at(-1);
  if (a === undefined || b === undefined) return undefined;
  const span = b.timeSeconds - a.timeSeconds;
  if (!(span > 0) || span < windowSeconds * MIN_RATE_SPAN_SHARE_OF_WINDOW) return undefined;
  return (b.iterations - a.iterations) / span;
}

export function summarize(
  samples: readonly ProgressSample[],
  nowSeconds: number,
  total?: number,
  windowSeconds: number = DEFAULT_THROUGHPUT_WINDOW_SECONDS,
): ProgressSummary {
  const last = samples.at(-1);
  return {
    completed: last?.iterations ?? 0,
    total,
    iterationsPerSecond: throughput(samples, nowSeconds, windowSeconds),
    lastReportSeconds: last?.timeSeconds,
  };
}

/**
 * At most this much of the file is read per poll. The file is the task's: a task appending faster than the worker
 * polls, or one that makes it huge at once (`truncate -s 10G`, sparse, instant), must not make a poll allocate or
 * decode its whole size (it would throw every poll and stop the heartbeat of every task on the host). Counts are
 * cumulative, so only the newest lines matter: a poll further behind skips ahead to the file's tail.
 */
export const MAX_PROGRESS_READ_BYTES = 1024 * 1024;
/** A line this long is no progress line (the format is two numbers): a partial line past it is dropped. */
const MAX_LINE_BYTES = 4096;
/**
 * Samples kept at most: a task writing a line per iteration at thousands a second is measured from a thinned series
 * (counts are cumulative, so every other sample of a dense series gives the same rate within one sample's step).
 */
const MAX_SAMPLES = 10_000;

/**
 * Tails a progress file: each `poll()` reads only the bytes appended since the last one (at most the newest
 * MAX_PROGRESS_READ_BYTES), keeps a partial last line for next time, and forgets samples older than the window
 * (memory stays bounded for week-long jobs). A file that shrank (truncated or replaced) is read again from the start.
 */
export class ProgressTracker {
  private offset = 0;
  private remainder = '';
  private samples: ProgressSample[] = [];
  malformedLines = 0;

  constructor(
    readonly path: string,
    readonly total?: number,
    readonly windowSeconds: number = DEFAULT_THROUGHPUT_WINDOW_SECONDS,
  ) {}

  async poll(nowSeconds: number = Date.now() / 1000): Promise<ProgressSummary> {
    let handle;
    try {
      handle = await open(this.path, 'r');
    } catch {
      return summarize(this.samples, nowSeconds, this.total, this.windowSeconds);
    }
    try {
      const { size } = await handle.stat();
      if (size < this.offset) {
        this.offset = 0;
        this.remainder = '';
        this.samples = [];
      }
      let skipToNewline = false;
      if (size - this.offset > MAX_PROGRESS_READ_BYTES) {
        // Far behind: the lines in between are older counts, superseded by the newest ones.
        this.offset = size - MAX_PROGRESS_READ_BYTES;
        this.remainder = '';
        skipToNewline = true;
      }
      if (size > this.offset) {
        const buffer = Buffer.alloc(size - this.offset);
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, this.offset);
        this.offset += bytesRead;
        let text = buffer.subarray(0, bytesRead).toString('utf8');
        // Skipped ahead into the middle of a line: it starts after the next newline.
        if (skipToNewline) text = text.slice(text.indexOf('\n') + 1 || text.length);
        const parsed = parseProgress(this.remainder + text);
        this.remainder = parsed.remainder;
        this.malformedLines += parsed.malformedLines;
        if (this.remainder.length > MAX_LINE_BYTES) {
          this.remainder = '';
          this.malformedLines++;
        }
        this.samples = this.samples.concat(parsed.samples);
      }
    } finally {
      await handle.close();
    }
    // Keep the window plus one anchor sample before it, and always the latest (for `completed`).
    const from = nowSeconds - this.windowSeconds;
    const firstInWindow = this.samples.findIndex((s) => s.timeSeconds >= from);
    const keepFrom = firstInWindow === -1 ? this.samples.length - 1 : Math.max(0, firstInWindow - 1);
    if (keepFrom > 0) this.samples = this.samples.slice(keepFrom);
    if (this.samples.length > MAX_SAMPLES) this.thin();
    return summarize(this.samples, nowSeconds, this.total, this.windowSeconds);
  }

  /**
   * Halve the series (or more), keeping the latest sample. Samples before the last decrease go first: throughput never
   * counts them, and thinning must not skip over a decrease and join two series into one.
   */
  private thin(): void {
    let start = 0;
    for (let i = 1; i < this.samples.length; i++)
      if ((this.samples[i]?.iterations ?? 0) < (this.samples[i - 1]?.iterations ?? 0)) start = i;
    const series = this.samples.slice(start);
    const step = Math.ceil(series.length / (MAX_SAMPLES / 2));
    this.samples = series.filter((_, i) => i % step === 0 || i === series.length - 1);
  }
}
