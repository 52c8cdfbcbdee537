import { ValidationError } from '../../../core/validation.js';

/**
 * `--submit`'s files, checked before the controller starts as every other file flag is: each is read and checked as
 * `fleetwise submit` checks it before sending anything (the spec, then its build contexts), so a wrong one stops the
 * start instead of leaving a controller serving with nothing submitted. What only the controller knows (the team's
 * token, its catalog) is still checked when the file is submitted.
 */
export async function checkSubmitFiles(files: readonly string[]): Promise<void> {
  if (files.length === 0) return;
  // Loaded only for a --submit start: a controller's start loads no more than it uses.
  const { checkSpecFile } = await import('../submit.js');
  const { BuildContexts } = await import('../../submit-contexts.js');
  const contexts = new BuildContexts((line) => process.stderr.write(line));
  const problems: string[] = [];
  for (const file of files) {
    // The submission runs in a child process, whose standard input is not the controller's.
    if (file === '-') {
      problems.push('-: standard input cannot be submitted at start: give a job spec file');
      continue;
    }
    try {
      const { raw } = await checkSpecFile(file);
      await contexts.check(raw, file, file);
    } catch (e) {
      if (!(e instanceof ValidationError)) throw e;
      problems.push(...e.problems.map((problem) => `${e.source}: ${problem}`));
    }
  }
  if (problems.length > 0) throw new ValidationError('--submit', problems);
}
