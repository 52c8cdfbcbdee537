/** How much of a task's output's end is read for its last lines: a failure reason quotes a few lines, not a log. */
export const LOG_TAIL_BYTES = 64 * 1024;

/**
 * The last `lines` lines of `text`, trailing blank space dropped. `cutAtStart`: the text is the end of a longer
 * output, so its first line may be a part of one and is dropped when other lines follow.
 */
export function lastLines(text: string, lines: number, cutAtStart: boolean): string {
  const all = text.trimEnd().split('\n');
  const whole = cutAtStart && all.length > 1 ? all.slice(1) : all;
  return whole.slice(-lines).join('\n');
}
