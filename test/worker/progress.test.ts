import { appendFileSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_THROUGHPUT_WINDOW_SECONDS,
  MAX_PROGRESS_READ_BYTES,
  parseProgress,
  ProgressTracker,
  summarize,
  throughput,
} from '../../src/worker/progress.js';

describe('progress lines', () => {
  it('parses complete lines, keeps a partial last line as remainder, counts malformed ones', () => {
    const parsed = parseProgress('100 0\n110 20\nnot a line\n\n120 40\n130 6');
    expect(parsed.samples).toEqual([
      { timeSeconds: 100, iterations: 0 },
      { timeSeconds: 110, iterations: 20 },
      { timeSeconds: 120, iterations: 40 },
    ]);
    expect(parsed.remainder).toBe('130 6');
    expect(parsed.malformedLines).toBe(1);
  });

  it('takes a number past what a double holds for a malformed line, not a sample of Infinity', () => {
    const parsed = parseProgress(`100 ${'9'.repeat(400)}\n110 5\n`);
    expect(parsed.samples).toEqual([{ timeSeconds: 110, iterations: 5 }]);
    expect(parsed.malformedLines).toBe(1);
  });

  it('uses Eva’s 300 s window by default', () => {
    expect(DEFAULT_THROUGHPUT_WINDOW_SECONDS).toBe(300);
    // 2 it/s for 1000 s, then 1 it/s for the last 400 s: the window sees only the recent rate.
    const samples = [
      ...Array.from({ length: 11 }, (_, i) => ({ timeSeconds: i * 100, iterations: i * 200 })),
      ...Array.from({ length: 4 }, (_, i) => ({
        timeSeconds: 1100 + i * 100,
        iterations: 2000 + (i + 1) * 100,
      })),
    ];
    expect(throughput(samples, 1400)).toBeCloseTo(1, 10);
    expect(throughput(samples, 1400, 1400)).toBeCloseTo(2400 / 1400, 10);
  });

  it('anchors a sparse reporter on the last sample before the window, and restarts the series on a decrease', () => {
    expect(
      throughput(
        [
          { timeSeconds: 0, iterations: 0 },
          { timeSeconds: 600, iterations: 1200 },
        ],
        600,
      ),
    ).toBe(2);
    expect(throughput([{ timeSeconds: 0, iterations: 0 }], 10)).toBeUndefined();
    const restarted = [
      { timeSeconds: 0, iterations: 500 },
      { timeSeconds: 10, iterations: 600 },
      { timeSeconds: 20, iterations: 400 }, // resumed from an older checkpoint
      { timeSeconds: 30, iterations: 430 },
    ];
    // A 20 s window: the new series spans half of it.
    expect(throughput(restarted, 30, 20)).toBe(3);
    expect(throughput(restarted, 30, 60)).toBeUndefined();
    expect(summarize(restarted, 30, 1000, 20)).toEqual({
      completed: 430,
      total: 1000,
      iterationsPerSecond: 3,
      lastReportSeconds: 30,
    });
  });

  it('a constant rate is measured exactly whatever the window and sampling, once reports span the window (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.integer({ min: 1, max: 120 }), { minLength: 2, maxLength: 60 }),
        fc.integer({ min: 1, max: 1000 }),
        (rate, gaps, window) => {
          let t = 1_700_000_000;
          const samples = gaps.map((g) => ({
            timeSeconds: (t += g),
            iterations: (t - 1_700_000_000) * rate,
          }));
          const first = samples[0]?.timeSeconds ?? 0;
          const last = samples.at(-1)?.timeSeconds ?? 0;
          const measured = throughput(samples, last, window);
          // Reports covering the whole window always give a rate; a rate given is exact.
          if (last - first >= window) expect(measured).toBeDefined();
          if (measured !== undefined) expect(measured).toBeCloseTo(rate, 9);
        },
      ),
    );
  });

  it('gives a steady reporter a rate whatever its gap, its latest report in the window (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 600 }),
        fc.integer({ min: 2, max: 1000 }),
        fc.integer({ min: 0, max: 599 }),
        (gap, window, sinceLast) => {
          const reports = Math.ceil(window / gap) + 2;
          const samples = Array.from({ length: reports }, (_, i) => ({
            timeSeconds: i * gap,
            iterations: i * gap * 3,
          }));
          // Its latest report is in the window (a reporter silent for longer has no rate, stalled or not).
          const now = (reports - 1) * gap + (sinceLast % Math.min(gap, window));
          expect(throughput(samples, now, window)).toBe(3);
        },
      ),
    );
  });

  it('whole-second stamps of a 4.7 it/s task never read far above 4.7 it/s, from its first seconds on', () => {
    // A counter writing a line per iteration stamped `date +%s`, its reports read as a worker polls them (60 s window).
    const rate = 4.7;
    const start = 1_700_000_000.4;
    const lines = Array.from({ length: 5 * 60 * 5 }, (_, i) => ({ at: start + i / rate, iterations: i }));
    const seen = (now: number): { timeSeconds: number; iterations: number }[] =>
      lines
        .filter((l) => l.at <= now)
        .map((l) => ({ timeSeconds: Math.floor(l.at), iterations: l.iterations }));
    for (const after of [1.6, 2.6, 4.6, 9.6, 29])
      expect(throughput(seen(start + after), start + after, 60)).toBeUndefined();
    const rates: number[] = [];
    for (let after = 1; after <= 300; after += 0.5) {
      const r = throughput(seen(start + after), start + after, 60);
      if (r !== undefined) rates.push(r);
    }
    // Measured from 30 s on, within the 2/window bound of whole-second stamps (1/30).
    expect(rates.length).toBeGreaterThan(500);
    for (const r of rates) expect(Math.abs(r / rate - 1)).toBeLessThanOrEqual(1 / 30);
  });
});

describe('ProgressTracker', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'fw-progress-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads appended bytes incrementally, joining a line split across polls, and restarts on truncation', async () => {
    const file = join(dir, 'progress');
    const tracker = new ProgressTracker(file, 100, 40);
    expect(await tracker.poll(1000)).toMatchObject({ completed: 0, iterationsPerSecond: undefined });
    writeFileSync(file, '1000 0\n1010 1');
    expect(await tracker.poll(1010)).toMatchObject({ completed: 0, iterationsPerSecond: undefined });
    appendFileSync(file, '0\n1020 30\n');
    expect(await tracker.poll(1020)).toEqual({
      completed: 30,
      total: 100,
      iterationsPerSecond: 1.5,
      lastReportSeconds: 1020,
    });
    writeFileSync(file, '2000 5\n');
    expect(await tracker.poll(2000)).toMatchObject({ completed: 5, iterationsPerSecond: undefined });
    expect(tracker.malformedLines).toBe(0);
  });

  it('reads a sparse 10 GiB file (a task ran `truncate -s 10G` on it) without allocating it', async () => {
    const file = join(dir, 'progress');
    writeFileSync(file, '1000 0\n1010 20\n');
    const tracker = new ProgressTracker(file, undefined, 40);
    expect(await tracker.poll(1010)).toMatchObject({ completed: 20 });
    truncateSync(file, 10 * 1024 ** 3);
    for (let i = 0; i < 3; i++) expect(await tracker.poll(1015)).toMatchObject({ completed: 20 });
    // Lines written after the hole are read.
    appendFileSync(file, '\n1020 40\n');
    expect(await tracker.poll(1020)).toMatchObject({ completed: 40, iterationsPerSecond: 2 });
  });

  it('skips ahead to the newest lines when far behind (a worker restarted under a chatty task)', async () => {
    const file = join(dir, 'progress');
    // 4 MiB of lines at 100 it/s, one per 0.01 s: four times what one poll reads.
    const lines: string[] = [];
    let bytes = 0;
    for (let i = 0; bytes < 4 * MAX_PROGRESS_READ_BYTES; i++) {
      const line = `${(1000 + i / 100).toFixed(2)} ${i}\n`;
      lines.push(line);
      bytes += line.length;
    }
    writeFileSync(file, lines.join(''));
    const last = lines.length - 1;
    const tracker = new ProgressTracker(file, undefined, 60);
    const summary = await tracker.poll(1000 + last / 100);
    expect(summary.completed).toBe(last);
    expect(summary.iterationsPerSecond).toBeCloseTo(100, 6);
    expect(tracker.malformedLines).toBe(0); // the line cut by the skip is not taken for a malformed one
  });

  it('a dense reporter is measured from a bounded, thinned series at the same rate', async () => {
    const file = join(dir, 'progress');
    const tracker = new ProgressTracker(file, undefined, 300);
    // 100 lines a second at 700 it/s for 300 s, polled every 10 s: 30,000 samples in the window.
    let t = 0;
    for (let poll = 0; poll < 30; poll++) {
      const chunk: string[] = [];
      for (let i = 0; i < 1000; i++, t++) chunk.push(`${1000 + t / 100} ${t * 7}\n`);
      appendFileSync(file, chunk.join(''));
      const summary = await tracker.poll(1000 + (t - 1) / 100);
      expect(summary.completed).toBe((t - 1) * 7);
      // A rate once the series spans half the window (150 s: the 16th poll).
      if (poll >= 15) expect(summary.iterationsPerSecond).toBeCloseTo(700, 6);
      else expect(summary.iterationsPerSecond).toBeUndefined();
    }
    expect((tracker as unknown as { samples: unknown[] }).samples.length).toBeLessThanOrEqual(10_000);
  });
});
