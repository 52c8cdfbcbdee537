import { statSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { ValidationError } from '../core/validation.js';
import { parseBuildContextRef } from '../protocol/object-keys.js';
import type { FleetwiseClient } from './client.js';
import { checkContext, MissingDockerfileError, packContext } from './context-archive.js';

/**
 * The `build:` directories of the files `fleetwise submit` is given: each checked locally (a directory, its
 * Dockerfile, names that pack, a size within the limits), then packed and uploaded, every file's before any of them is
 * dry-run or submitted. An upload is content-addressed and makes no job, so a file whose context is refused (by its
 * packing or by the controller) leaves none submitted; and the dry run checks the references the submission sends.
 */

/** A spec as read from its file, sent on as JSON. */
export type RawSpec = Record<string, unknown> & { tasks?: unknown };

/** A task's `build` in object form (its form was validated with the spec). */
interface RawBuild {
  readonly context: string;
  readonly dockerfile?: string | undefined;
}

/** A task of a spec file, with its `build` as a local directory and the Dockerfile in it, if it has one. */
interface SpecTask {
  readonly index: number;
  readonly task: unknown;
  readonly build?: { readonly directory: string; readonly dockerfile?: string | undefined };
}

/** The tasks of a spec file; a `build.context` is relative to the file unless absolute. */
function buildsOf(raw: RawSpec, file: string): SpecTask[] {
  if (!Array.isArray(raw.tasks)) return [];
  return (raw.tasks as unknown[]).map((task, index) => {
    const build = (task as { build?: unknown }).build;
    if (build === undefined) return { index, task };
    const { context, dockerfile } =
      typeof build === 'string' ? { context: build, dockerfile: undefined } : (build as RawBuild);
    // A context already uploaded (as `fleetwise job ID --json` shows a spec) goes as it is: the controller admits it
    // for the team that uploaded it (its dry run checks that). Only a local directory is packed and uploaded.
    if (typeof context === 'string' && parseBuildContextRef(context) !== undefined && !isDirectory(context))
      return { index, task };
    return {
      index,
      task,
      build: { directory: isAbsolute(context) ? context : resolve(dirname(file), context), dockerfile },
    };
  });
}

function isDirectory(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false })?.isDirectory() === true;
}

/** The field a build context's problem is reported at: the Dockerfile's when it is missing, else the context's. */
function buildProblem(index: number, e: unknown, dockerfile: string | undefined): string {
  const field = e instanceof MissingDockerfileError && dockerfile !== undefined ? 'dockerfile' : 'context';
  return `tasks.${index}.build.${field}: ${(e as Error).message}`;
}

/** One archive per directory and Dockerfile (the Dockerfile is always packed, whatever .dockerignore says). */
function contextKey(directory: string, dockerfile: string | undefined): string {
  return `${directory}\0${dockerfile ?? ''}`;
}

export class BuildContexts {
  /** Each context's check, once however many tasks and files use it. */
  private readonly checks = new Map<string, Promise<void>>();
  /** Each context's reference once uploaded. */
  private readonly refs = new Map<string, string>();

  constructor(private readonly log: (line: string) => void) {}

  /**
   * Refuse a spec whose build contexts cannot be sent as they are (not a directory, without the Dockerfile they name,
   * a name that does not pack, over the size the controller takes), reading no file: the job would otherwise queue,
   * launch an instance and fail its build there, or a later file's upload fail after earlier files were submitted.
   * `source` names the file in the error.
   */
  async check(raw: RawSpec, file: string, source: string): Promise<void> {
    const problems: string[] = [];
    for (const { index, build } of buildsOf(raw, file)) {
      if (build === undefined) continue;
      const key = contextKey(build.directory, build.dockerfile);
      let check = this.checks.get(key);
      if (check === undefined) {
        check = checkContext(build.directory, build.dockerfile);
        this.checks.set(key, check);
      }
      await check.catch((e: unknown) => problems.push(buildProblem(index, e, build.dockerfile)));
    }
    if (problems.length > 0) throw new ValidationError(source, problems);
  }

  /**
   * The spec with each task's local `build.context` directory packed, uploaded and replaced by the stored copy's
   * reference. The same directory (and Dockerfile) used by several tasks or files is uploaded once.
   */
  async upload(raw: RawSpec, file: string, source: string, client: FleetwiseClient): Promise<RawSpec> {
    if (!Array.isArray(raw.tasks)) return raw;
    const tasks: unknown[] = [];
    for (const { index, task, build: local } of buildsOf(raw, file)) {
      const build = (task as { build?: unknown }).build;
      if (local === undefined) {
        tasks.push(task);
        continue;
      }
      const ref = await this.uploaded(index, local.directory, local.dockerfile, source, client);
      tasks.push({
        ...(task as object),
        build: typeof build === 'string' ? ref : { ...(build as object), context: ref },
      });
    }
    return { ...raw, tasks };
  }

  private async uploaded(
    index: number,
    directory: string,
    dockerfile: string | undefined,
    source: string,
    client: FleetwiseClient,
  ): Promise<string> {
    const key = contextKey(directory, dockerfile);
    const known = this.refs.get(key);
    if (known !== undefined) return known;
    let packed;
    try {
      packed = await packContext(directory, undefined, dockerfile);
    } catch (e) {
      throw new ValidationError(source, [buildProblem(index, e, dockerfile)]);
    }
    let ref: string;
    try {
      ref = (await client.uploadContext(packed.archive)).ref;
    } catch (e) {
      // The cause keeps the controller's answer: a 413 is bad input (exit 2), a lost connection is not.
      throw new Error(
        `${source}: tasks.${index}.build.context: uploading build context ${directory}: ${(e as Error).message}`,
        { cause: e },
      );
    }
    this.refs.set(key, ref);
    this.log(
      `uploaded build context ${directory} (${packed.files} files, ${packed.archive.length} bytes) as ${ref}\n`,
    );
    return ref;
  }
}
