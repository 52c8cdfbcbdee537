import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadCatalogFile, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { parseJobSpec } from '../../src/controller/job-spec/parse.js';
import type { JobSpec } from '../../src/controller/job-spec/spec.js';
import type { JobState, StateStore } from '../../src/controller/state-store.js';
import type { FleetwiseTraceDocument } from '../../src/sim/traces/fleetwise-json.js';

/**
 * A small controller job history written through the StateStore API on a hand-driven clock, with what an export of
 * it must say: each job's arrival (relative to the first), its duration and where that came from.
 */

/** An example job spec of examples/jobs, parsed against the bundled catalog. */
export const example = (name: string): JobSpec => {
  const path = join(PROJECT_ROOT, 'examples', 'jobs', name);
  return parseJobSpec(readFileSync(path, 'utf8'), path, loadCatalogFile());
};

export interface ExpectedJob {
  readonly id: string;
  readonly name: string;
  readonly arrivalSeconds: number;
  readonly durationSeconds: number;
  readonly durationFrom: 'measured' | 'declared';
  readonly successful?: false;
}

/** A trace's jobs in the terms an `ExpectedJob` states, to compare with `JobHistory.exported`. */
export function exportedJobsOf(document: FleetwiseTraceDocument): Record<string, unknown>[] {
  return document.jobs.map((j) => ({
    id: j.id,
    name: j.name,
    arrivalSeconds: j.arrivalSeconds,
    durationSeconds: j.durationSeconds,
    durationFrom: j.durationFrom,
    ...(j.successful === undefined ? {} : { successful: j.successful }),
  }));
}

export interface JobHistory {
  readonly exported: readonly ExpectedJob[];
  readonly skipped: readonly string[];
}

/** Fill `store` (created with `nowSeconds: clock.now`) with the history; `clock.set` moves its time. */
export function writeJobHistory(store: StateStore, clock: { set(seconds: number): void }): JobHistory {
  const resnet = example('resnet.yaml');
  const gpt2 = example('gpt2.yaml');
  const ddp = example('resnet-ddp.yaml');
  const { expectedDurationSeconds: _declared, ...undeclared } = example('graphsage.yaml');
  const at = (t: number, id: string, state: JobState): void => {
    clock.set(t);
    store.setJobState(id, state);
  };
  clock.set(1000);
  const moved = store.submitJob(resnet).id; // job-1: runs 480 s, moves, runs 500 s more (80 s init each)
  clock.set(1100);
  const failed = store.submitJob(gpt2).id; // job-2: runs 300 s (15 s init), fails
  clock.set(1250);
  const waiting = store.submitJob(ddp).id; // job-3: still queued, declares its duration
  clock.set(1300);
  const cancelled = store.submitJob(resnet).id; // job-4: cancelled before it ran
  clock.set(1400);
  const unknown = store.submitJob(undeclared as JobSpec).id; // job-5: running, no declared duration
  at(1010, moved, 'starting');
  at(1020, moved, 'running');
  at(1150, failed, 'starting');
  at(1200, failed, 'running');
  at(1310, cancelled, 'cancelled');
  at(1420, unknown, 'starting');
  at(1430, unknown, 'running');
  at(1500, moved, 'migrating');
  at(1500, failed, 'failed');
  at(1520, moved, 'starting');
  at(1540, moved, 'running');
  at(2040, moved, 'succeeded');
  return {
    exported: [
      {
        id: moved,
        name: resnet.name,
        arrivalSeconds: 0,
        durationSeconds: 980 - 2 * 80,
        durationFrom: 'measured',
      },
      {
        id: failed,
        name: gpt2.name,
        arrivalSeconds: 100,
        durationSeconds: 300 - 15,
        durationFrom: 'measured',
        successful: false,
      },
      {
        id: waiting,
        name: ddp.name,
        arrivalSeconds: 250,
        durationSeconds: ddp.expectedDurationSeconds ?? Number.NaN,
        durationFrom: 'declared',
      },
    ],
    skipped: [cancelled, unknown],
  };
}
