import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { defineConfig } from 'vitest/config';

/**
 * The files that take longest (multi-process runs that mostly wait on their processes), started first so the run
 * does not end with one of them alone; the rest follow in vitest's own order. The active/standby run starts after
 * the first three rather than beside the chaos run's first minute, when fifty workers start at once: a controller
 * starved for its renew deadline then loses its lease, which is the lease working, not the failure the test looks for.
 */
const LONGEST_FIRST = [
  'test/controller/chaos.test.ts',
  'test/cli/client-newcomer.test.ts',
  'test/controller/local-stop.test.ts',
  'test/controller/controller-ha.test.ts',
  'test/controller/restore-round-trip.test.ts',
  'test/bench/controller-bench.test.ts',
  'test/controller/local-mode.test.ts',
  'test/controller/store-outage-drain.test.ts',
  'test/controller/worker-identity-local.test.ts',
];

class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification): number => {
      const i = LONGEST_FIRST.findIndex((suffix) => f.moduleId.endsWith(suffix));
      return i === -1 ? LONGEST_FIRST.length : i;
    };
    return sorted
      .map((f, i) => ({ f, i }))
      .sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i)
      .map((x) => x.f);
  }
}

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Files share a worker's module cache: each file importing the AWS SDK, fastify and the scheduler afresh cost 88 s
    // of the suite's time, 16 s shared (617 s → 563 s on two cores). Tests restore what they change in the environment.
    isolate: false,
    // Three files at a time on two cores: the longest files mostly wait (the active/standby run uses a core a third
    // of its 125 s, waiting out leases; the chaos run waits out its schedule), and one file per core left the cores
    // idle meanwhile. On the same host and evening, fresh-clone CI runs took 804 s of vitest with three at a time and
    // 918–996 s with two. vitest's default (cores − 1) runs the suite serially on a 2-core machine.
    maxWorkers: 3,
    sequence: { sequencer: LongestFirstSequencer },
  },
});
