import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';

/** The quick start's job spec. */
export const COUNTER_SPEC = join(PROJECT_ROOT, 'examples', 'jobs', 'counter.yaml');

/**
 * The quick-start counter shortened for tests (the example itself runs for minutes, so a reader has time to drain
 * it): written to `path` with an absolute build context. Every override must land, so a change to the example
 * fails here instead of silently giving tests a minutes-long job.
 */
export function writeShortCounterSpec(
  path: string,
  options: { countTo: number; stepSeconds: number; checkpointSeconds: number },
): string {
  const original = readFileSync(COUNTER_SPEC, 'utf8');
  const replacements: [RegExp, string][] = [
    [/context: \.\.\/counter/, `context: ${join(PROJECT_ROOT, 'examples', 'counter')}`],
    [/COUNT_TO: \d+/, `COUNT_TO: ${options.countTo}`],
    [/STEP_SECONDS: '[\d.]+'/, `STEP_SECONDS: '${options.stepSeconds}'`],
    [/CHECKPOINT_SECONDS: \d+/, `CHECKPOINT_SECONDS: ${options.checkpointSeconds}`],
    [/totalIterations: \d+/, `totalIterations: ${options.countTo}`],
    [
      /expectedDurationSeconds: \d+/,
      `expectedDurationSeconds: ${Math.max(1, Math.ceil(options.countTo * options.stepSeconds))}`,
    ],
  ];
  let text = original;
  for (const [pattern, value] of replacements) {
    if (!pattern.test(text)) throw new Error(`${COUNTER_SPEC}: no ${String(pattern)} to shorten for tests`);
    text = text.replace(pattern, value);
  }
  writeFileSync(path, text);
  return path;
}

/** The counter example's script, run by the process executor with `sh`. */
const COUNTER_SCRIPT = join(PROJECT_ROOT, 'examples', 'counter', 'counter.sh');

/** A job's view in the API, as far as the counter tests read it. */
export interface CounterJobView {
  state: string;
  migrations: number;
  progress: { completed: number };
  instances: { id: string }[];
}

/** A submission body for the counter script under the process executor: one small task, 0.05 s steps. */
export function counterJobBody(options: {
  countTo: number;
  checkpointSeconds: number;
  checkpointTimeoutSeconds: number;
}): Record<string, unknown> {
  return {
    name: 'counter',
    team: 'examples',
    tasks: [
      {
        name: 'counter',
        command: ['sh', COUNTER_SCRIPT],
        env: {
          COUNT_TO: String(options.countTo),
          STEP_SECONDS: '0.05',
          CHECKPOINT_SECONDS: String(options.checkpointSeconds),
        },
        demand: { any: [0, 0.25, 0.25] },
        shmSizeGiB: 0.0625,
      },
    ],
    checkpoint: { signal: 'SIGTERM', timeoutSeconds: options.checkpointTimeoutSeconds },
  };
}
