/**
 * Seeded pseudo-random numbers (sfc32 seeded through splitmix32), so every trace, sample and simulation is
 * reproducible from its seed. Never use Math.random in fleetwise code.
 */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    let s = seed >>> 0;
    const next = (): number => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
    for (let i = 0; i < 12; i++) this.nextUint32();
  }

  nextUint32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Uniform in [lo, hi). */
  uniform(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next();
  }

  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[this.int(items.length)] as T;
  }

  /** Exponential with the given mean (Poisson inter-arrival times). */
  exponential(mean: number): number {
    return -mean * Math.log(1 - this.next());
  }

  /** A new independent generator derived from this one (for per-run streams). */
  fork(): Rng {
    return new Rng(this.nextUint32());
  }
}

/**
 * A uniform number in [0, 1) that depends only on its inputs (a seeded hash, not a stream): for values that must not
 * depend on the order they are asked for, such as the noise of an instance pair in a time slot.
 */
export function hashUnit(seed: number, ...parts: readonly (string | number)[]): number {
  let h = (seed ^ 0x811c9dc5) >>> 0;
  const mix = (x: number): void => {
    h = Math.imul(h ^ x, 0x01000193) >>> 0;
    h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> 0;
  };
  for (const part of parts) {
    if (typeof part === 'number') {
      mix(part >>> 0);
      mix(Math.floor(part / 4294967296) >>> 0);
    } else for (let i = 0; i < part.length; i++) mix(part.charCodeAt(i));
    mix(0x9e3779b9);
  }
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return ((h ^ (h >>> 16)) >>> 0) / 4294967296;
}
