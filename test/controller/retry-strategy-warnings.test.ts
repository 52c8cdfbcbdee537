import { describe, expect, it } from 'vitest';
import { validateJobSpec } from '../../src/controller/job-spec/parse.js';
import { retryStrategyWarnings } from '../../src/controller/job-spec/retry-schema.js';
import { catalog } from './controller-fixtures.js';

/** A `retry` rule with no attempt left to retry in: the spec is taken, and its submitter told which field to set. */
const parsed = (retryStrategy: unknown) =>
  validateJobSpec(
    { name: 'flaky', team: 'research', tasks: [{ command: ['true'], demand: [0, 1, 1] }], retryStrategy },
    'spec',
    catalog,
  );

describe('retryStrategy warnings', () => {
  it('name retryStrategy.attempts when a retry rule is given and attempts is left at its default of 1', () => {
    const spec = parsed({ evaluateOnExit: [{ onExitCode: '7', action: 'retry' }] });
    expect(spec.retryStrategy?.attempts).toBe(1);
    expect(retryStrategyWarnings(spec)).toEqual([
      'retryStrategy.evaluateOnExit[0] (7: retry) asks for a retry, but retryStrategy.attempts is 1 (the default ' +
        'when left out; the first run counts): the job never runs again; set retryStrategy.attempts (2–10) to ' +
        'allow retries',
    ]);
    // Attempts set to 1 by hand say the same; the first retry rule is the one named.
    const exitFirst = parsed({
      attempts: 1,
      evaluateOnExit: [
        { onExitCode: '1*', action: 'exit' },
        { onExitCode: 137, action: 'RETRY' },
      ],
    });
    expect(retryStrategyWarnings(exitFirst)).toEqual([
      expect.stringMatching(/^retryStrategy\.evaluateOnExit\[1\] \(137: retry\) asks for a retry, /),
    ]);
  });

  it('say nothing when a retry can happen or none is asked for', () => {
    expect(
      retryStrategyWarnings(parsed({ attempts: 2, evaluateOnExit: [{ onExitCode: '7', action: 'retry' }] })),
    ).toEqual([]);
    expect(retryStrategyWarnings(parsed({ evaluateOnExit: [{ onExitCode: '*', action: 'exit' }] }))).toEqual(
      [],
    );
    expect(retryStrategyWarnings(parsed({ attempts: 3 }))).toEqual([]);
    expect(retryStrategyWarnings(parsed(undefined))).toEqual([]);
  });
});
