import { ValidationError } from '../../src/core/validation.js';

/** The ValidationError `fn` throws; any other error is passed on, and none at all fails the test. */
export function refusal(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ValidationError) return e;
    throw e;
  }
  throw new Error('expected a ValidationError');
}
