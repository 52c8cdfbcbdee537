/** The unprivileged user (nobody) a worker that is not root stands for. */
export const NOBODY = 65534;

/**
 * Run `step` with the effective user and group switched to nobody (tests run as root; root reads, writes and removes
 * through any mode, so only another user meets a read-only directory), switching back whatever it does. The process
 * is the test file's own (vitest forks), so nothing else runs as nobody meanwhile.
 */
export async function asNobody<T>(step: () => Promise<T>): Promise<T> {
  const { seteuid, setegid } = process;
  if (seteuid === undefined || setegid === undefined || process.geteuid?.() !== 0)
    throw new Error('switching to an unprivileged user needs a POSIX system and root');
  setegid(NOBODY);
  seteuid(NOBODY);
  try {
    return await step();
  } finally {
    seteuid(0);
    setegid(0);
  }
}
