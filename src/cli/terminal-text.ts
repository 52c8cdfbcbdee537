/**
 * Text from the controller shown on a terminal. Much of it comes from tasks (a failure's reason is the task's last
 * output) or from whoever submitted a job (names, labels), so it may hold control characters: an escape sequence
 * could clear the screen, retitle the window or redraw lines to say a failed job succeeded. Each control character
 * but a line break and a tab is shown as a visible `\xNN` instead. A task's log (`fleetwise logs`) is its bytes as
 * they are, not passed through this.
 */

// C0 (but \t and \n), DEL and C1: what a terminal may act on rather than print.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** `text` with each control character but `\n` and `\t` written as `\xNN` (ESC: `\x1b`). */
export function terminalSafe(text: string): string {
  return text.replace(CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/** `value` with every string in it (at any depth, keys included) made terminal-safe; other values as they are. */
export function terminalSafeDeep<T>(value: T): T {
  return safeDeep(value) as T;
}

function safeDeep(value: unknown): unknown {
  if (typeof value === 'string') return terminalSafe(value);
  if (Array.isArray(value)) return value.map(safeDeep);
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [terminalSafe(k), safeDeep(v)]));
  return value;
}
