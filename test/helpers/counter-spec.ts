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
