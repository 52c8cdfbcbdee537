import { TextDecoder } from 'node:util';
import { terminalSafe } from './terminal-text.js';

/**
 * Prints a job's task logs part by part (one part per run of a task, headed `==> name <==` as `tail` heads files),
 * fetching of each part only the bytes past what it printed before: following a long log costs what is new. Bytes are
 * decoded per part as they stream, so a character split between two fetches prints whole.
 */

export interface LogPartSource {
  parts(): Promise<readonly { readonly name: string; readonly sizeBytes: number }[]>;
  /** A part's bytes from `from` on, as many as one answer holds; empty when there are none. */
  bytes(part: string, from: number): Promise<Buffer>;
}

interface PartProgress {
  bytes: number;
  readonly decoder: TextDecoder;
}

export class LogPartsPrinter {
  private readonly progress = new Map<string, PartProgress>();
  private current: string | undefined;
  private endsWithNewline = true;
  printedAnything = false;

  constructor(
    private readonly write: (text: string) => void,
    /**
     * Print every part in one pass, empty ones headed too (what `fleetwise logs` prints); otherwise a part is
     * headed when it has output to show, and a part may still grow (following).
     */
    private readonly whole = false,
  ) {}

  /** Print what is new in each part since the last call. */
  async update(source: LogPartSource): Promise<void> {
    for (const part of await source.parts()) {
      let progress = this.progress.get(part.name);
      if (progress === undefined) {
        progress = { bytes: 0, decoder: new TextDecoder() };
        this.progress.set(part.name, progress);
        if (this.whole) this.print(part.name, '');
      }
      while (progress.bytes < part.sizeBytes) {
        const chunk = await source.bytes(part.name, progress.bytes);
        if (chunk.length === 0) break;
        progress.bytes += chunk.length;
        this.print(part.name, progress.decoder.decode(chunk, { stream: true }));
      }
      if (this.whole) this.print(part.name, progress.decoder.decode());
    }
  }

  /** The output ends: the last line ends with a newline, as every part's does. */
  finish(): void {
    for (const [name, progress] of this.progress) {
      // A character cut off at the end (the part ended inside it) prints as the replacement character.
      const rest = progress.decoder.decode();
      if (rest !== '') this.print(name, rest);
    }
    if (!this.endsWithNewline) this.write('\n');
    this.endsWithNewline = true;
  }

  private print(name: string, text: string): void {
    if (this.current !== name) {
      if (text === '' && !this.whole) return;
      if (!this.endsWithNewline) this.write('\n');
      // The part's name comes from the controller; its bytes below are the task's own, as they are.
      this.write(`==> ${terminalSafe(name)} <==\n`);
      this.current = name;
      this.endsWithNewline = true;
      this.printedAnything = true;
    }
    if (text === '') return;
    this.write(text);
    this.endsWithNewline = text.endsWith('\n');
  }
}
