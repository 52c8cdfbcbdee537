import { availableParallelism } from 'node:os';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { defineConfig } from 'vitest/config';

/**
 * The files that take longest (multi-process runs that mostly wait on their processes), started first so the run
 * does not end with one of them alone; the rest follow in vitest's own order. The active/standby run starts once one
 * of the first three files has ended, not beside the chaos run's first minute, when fifty workers start at once: a
 * controller starved for its renew deadline then loses its lease, which is the lease working, not the failure the test
 * looks for.
 */
const LONGEST_FIRST = [
  'test/controller/chaos.test.ts',
  'test/cli/client-newcomer.test.ts',
  'test/cli/bench-arms.test.ts',
  'test/controller/controller-ha.test.ts',
  'test/controller/local-stop.test.ts',
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
    // of the suite's time on two cores, 16 s shared. Tests restore what they change in the environment.
    isolate: false,
    // One file more than cores: most of the longest files wait on their processes (controllers, workers, moto_server,
    // PostgreSQL), and on two cores two files at a time left a third of the CPU idle (617 s; three: 453 s, 146% CPU).
    // vitest's default (cores − 1) runs the suite serially on a 2-core machine.
    maxWorkers: availableParallelism() + 1,
    sequence: { sequencer: LongestFirstSequencer },
  },
});
