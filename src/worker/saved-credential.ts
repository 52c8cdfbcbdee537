import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { newWorkerToken } from '../protocol/launch-secret.js';

/**
 * The per-instance token, kept in the worker's work directory (owner-only, 0600) so that a restarted worker
 * re-registers its instance with it: the launch credential is good once per instance (the controller refuses it once
 * the instance has a worker), so without this file a restart could not reclaim the instance. The worker chooses the
 * token and saves it before its launch registration (`proposal`), so an answer lost on the way costs nothing: the same
 * token asked again is answered again.
 */

export const CREDENTIAL_FILE = 'worker-credential.json';

const credentialSchema = z.object({
  cloudInstanceId: z.string().min(1),
  workerToken: z.string().min(16),
  /** The controller's record id, for people reading the file. */
  controllerInstanceId: z.string().optional(),
});

export class SavedCredential {
  readonly path: string;

  constructor(
    private readonly workDir: string,
    private readonly cloudInstanceId: string,
  ) {
    this.path = join(workDir, CREDENTIAL_FILE);
  }

  /** The saved token of this instance; undefined when there is none, it is another instance's, or unreadable. */
  load(): string | undefined {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch {
      return undefined;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return undefined;
    }
    const parsed = credentialSchema.safeParse(value);
    return parsed.success && parsed.data.cloudInstanceId === this.cloudInstanceId
      ? parsed.data.workerToken
      : undefined;
  }

  /**
   * The token this worker proposes at its launch registration: the saved one, else a new random one, saved before it
   * is sent (so a retry, or a restart after an answer that never came, proposes the same and the controller can tell
   * it is the same worker asking again).
   */
  proposal(): string {
    const saved = this.load();
    if (saved !== undefined) return saved;
    const token = newWorkerToken();
    this.save(token, undefined);
    return token;
  }

  /** Written whole or not at all (temporary file, then rename), readable by the owner only. */
  save(workerToken: string, controllerInstanceId: string | undefined): void {
    mkdirSync(this.workDir, { recursive: true, mode: 0o700 });
    const temp = `${this.path}.${process.pid}.tmp`;
    const record = { cloudInstanceId: this.cloudInstanceId, workerToken, controllerInstanceId };
    writeFileSync(temp, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
    renameSync(temp, this.path);
  }
}
