import { z } from 'zod';

/**
 * Text a client writes into the state (a reason, a label): any characters but control ones other than tab and
 * newline. PostgreSQL cannot store a NUL (its store keeps U+FFFD in its place), and the rest would reach terminals
 * and logs verbatim; refused alike on either store, so a request does not depend on where the state is kept.
 */
const CONTROL_CHARACTERS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

/** A free-text field of 1 to `max` characters. */
export function freeText(max: number): z.ZodString {
  return z
    .string()
    .min(1, 'must not be empty')
    .max(max, `at most ${max} characters`)
    .refine(
      (text) => !CONTROL_CHARACTERS.test(text),
      'control characters are not allowed (tab and newline are)',
    );
}
