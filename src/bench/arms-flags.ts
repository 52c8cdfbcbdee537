import { resolve } from 'node:path';
import { parse as parseShellWords } from 'shell-quote';
import { ValidationError } from '../core/validation.js';
import type { Arm } from './arms-report.js';
import { buildCli } from './build-runs.js';

/**
 * The flags of `fleetwise bench arms` itself, read before any simulate flag is: the seed list, the arms and their
 * builds, and the simulate flags the bench refuses in `--common` and the arms because it sets them itself.
 */

const MAX_SEEDS = 200;
/** The largest seed simulate takes (its --seed, a 32-bit unsigned integer). */
const MAX_SEED = 2 ** 32 - 1;

/** `4-19`, `4,7,9` or a mix (`1-3,8`): distinct integers from 0 to MAX_SEED, in the order given. */
export function parseSeedList(text: string): number[] {
  const seeds: number[] = [];
  for (const part of text.split(',')) {
    const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(part);
    if (m === null)
      throw new ValidationError('--seeds', [`"${part.trim()}" is not a seed or a range like 4-19`]);
    // As typed: a number past 2^53 is no longer itself once read (99999999999999999999 reads as 1e20).
    for (const digits of [m[1], m[2]])
      if (digits !== undefined && BigInt(digits) > BigInt(MAX_SEED))
        throw new ValidationError('--seeds', [
          `seed ${digits.replace(/^0+(?=\d)/, '')} is above ${MAX_SEED}, the largest seed simulate takes`,
        ]);
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (to < from) throw new ValidationError('--seeds', [`range ${from}-${to} runs backwards`]);
    if (seeds.length + (to - from + 1) > MAX_SEEDS)
      throw new ValidationError('--seeds', [`at most ${MAX_SEEDS} seeds`]);
    for (let s = from; s <= to; s++) {
      if (seeds.includes(s)) throw new ValidationError('--seeds', [`seed ${s} is named twice`]);
      seeds.push(s);
    }
  }
  return seeds;
}

const ARM_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** `name=simulate flags`: the arm's name and its flags split as a shell would (quotes kept together, no operators). */
export function parseArm(text: string): { readonly name: string; readonly args: string[] } {
  const eq = text.indexOf('=');
  const name = eq < 0 ? '' : text.slice(0, eq).trim();
  if (!ARM_NAME.test(name))
    throw new ValidationError('--arm', [
      `"${text}": expected name=flags, e.g. srpt=--queue srpt (a name of letters, digits, _ . -)`,
    ]);
  return { name, args: shellWords(text.slice(eq + 1), `--arm ${name}`) };
}

/** Every `--arm`, in the order given; two of one name are refused. */
export function parseArms(texts: readonly string[]): Arm[] {
  const arms = texts.map(parseArm);
  const names = new Set<string>();
  for (const a of arms) {
    if (names.has(a.name)) throw new ValidationError('--arm', [`two arms are named ${a.name}`]);
    names.add(a.name);
  }
  return arms;
}

/** Flags split as a shell would; `$X` stays as written (nothing is expanded) and operators are refused. */
export function shellWords(text: string, source: string): string[] {
  return parseShellWords(text, (key) => `$${key}`).map((word) => {
    if (typeof word === 'string') return word;
    throw new ValidationError(source, [
      `"${text}": only flags and values, no shell operators, globs or comments`,
    ]);
  });
}

/** Another build an arm runs with: its directory and its CLI. */
export interface ArmBuild {
  readonly dir: string;
  readonly cli: string;
}

/** `--build name=dir`: which arms run another build, as arm name → that build's directory and CLI. */
export function armBuilds(texts: readonly string[], arms: readonly Arm[]): Map<string, ArmBuild> {
  const names = arms.map((a) => a.name);
  const builds = new Map<string, ArmBuild>();
  for (const text of texts) {
    const eq = text.indexOf('=');
    const name = eq < 0 ? '' : text.slice(0, eq).trim();
    const dir = eq < 0 ? '' : text.slice(eq + 1).trim();
    if (!names.includes(name) || dir === '')
      throw new ValidationError('--build', [
        `"${text}": expected arm=dir with an arm given by --arm (${names.join(', ')})`,
      ]);
    if (builds.has(name)) throw new ValidationError('--build', [`arm ${name} is given two builds`]);
    builds.set(name, { dir: resolve(dir), cli: buildCli(dir, `--build ${name}`) });
  }
  return builds;
}

/** Flags the bench sets itself on every run, and so refuses in --common and --arm. */
const BENCH_SET_FLAGS = ['--seed', '--json', '--out', '--parallel'] as const;

function refuseFlags(args: readonly string[], flags: readonly string[], source: string, why: string): void {
  for (const arg of args)
    for (const flag of flags)
      if (arg === flag || arg.startsWith(`${flag}=`)) throw new ValidationError(source, [`${flag}: ${why}`]);
}

/**
 * Refuse the simulate flags the bench sets itself, those every run would write over each other's, and with
 * `--cap-share` (`capShare` not null) the caps it sets: a dollar cap anywhere, any cap on the uncapped reference.
 */
export function refuseArmFlags(
  common: readonly string[],
  arms: readonly Arm[],
  capShare: number | null,
): void {
  const refuseEverywhere = (flags: readonly string[], why: string): void => {
    refuseFlags(common, flags, '--common', why);
    for (const a of arms) refuseFlags(a.args, flags, `--arm ${a.name}`, why);
  };
  refuseEverywhere(BENCH_SET_FLAGS, 'the bench sets it on every run');
  refuseEverywhere(
    ['--save-colocation-table'],
    'each run would write it over the one before: save a table with simulate',
  );
  if (capShare === null) return;
  refuseEverywhere(
    ['--cap-dollars-per-hour'],
    'with --cap-share the cap is the share of each seed’s uncapped peak',
  );
  refuseFlags(
    common,
    ['--cap-instances', '--quota'],
    '--common',
    'with --cap-share the uncapped reference run would be capped by it, and so every seed’s cap',
  );
}
