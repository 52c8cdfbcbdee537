import { z } from 'zod';
import { DEFAULT_DOMAIN_RTT_MICROSECONDS, type DomainRtts } from '../core/latency-model.js';
import { isZoneOf, type SpotMarket } from '../core/spot.js';
import { ValidationError } from '../core/validation.js';

/**
 * The simulated network (`fleetwise simulate --latency-config FILE`): zones, the round trip of each latency domain,
 * NoMora's noise and optional congestion episodes (research digest §10.5 "Latency model"). Validated with zod; every
 * problem names its field.
 */

/** A `[low, high]` pair of `bound` values. */
const range = (what: string, bound: z.ZodNumber) =>
  z
    .tuple([bound, bound], { error: `expected [low, high] ${what}` })
    .refine(([lo, hi]) => lo <= hi, 'low must not exceed high');

/** A noise factor: a factor of 0 would make round trips 0 µs. */
const noiseFactor = z.number().gt(0, 'must be > 0 (a factor of 0 makes round trips 0 µs)').max(10);

/** The shortest noise interval (NoMora's latency update period; the simulation steps at every interval). */
export const MIN_NOISE_INTERVAL_SECONDS = 1;

const rtt = z.number().finite().nonnegative('must be ≥ 0 µs').max(1_000_000, 'at most 1000000 µs');

/** The latency domains beyond an instance, nearest first, and all of them. */
const FARTHER_DOMAINS = ['placement-group', 'zone', 'cross-zone'] as const;
const DOMAINS = ['same-instance', ...FARTHER_DOMAINS] as const;

/** Each latency domain and the next farther one: a round trip may not shrink from one to the next. */
const NEXT_DOMAINS = [
  ['same-instance', 'placement-group'],
  ['placement-group', 'zone'],
  ['zone', 'cross-zone'],
] as const;

const networkConfigFields = z.strictObject({
  /** Zones of the region: a count (named after the region: us-east-1a, …) or the names. */
  zones: z
    .union([
      z.number().int('a whole number').min(1, 'at least 1').max(26, 'at most 26'),
      z
        .array(z.string().min(1))
        .min(1, 'at least one zone')
        .max(26, 'at most 26 zones')
        .refine((zones) => new Set(zones).size === zones.length, 'zone names must differ'),
    ])
    .default(3),
  /** Round trip (µs) between two instances of each domain before noise (digest §10.2's placeholders by default). */
  domainRttMicroseconds: z
    .strictObject({
      'same-instance': rtt.default(DEFAULT_DOMAIN_RTT_MICROSECONDS['same-instance']),
      'placement-group': rtt.default(DEFAULT_DOMAIN_RTT_MICROSECONDS['placement-group']),
      zone: rtt.default(DEFAULT_DOMAIN_RTT_MICROSECONDS.zone),
      'cross-zone': rtt.default(DEFAULT_DOMAIN_RTT_MICROSECONDS['cross-zone']),
    })
    // NoMora's placement prefers the nearer domain: were it slower, every plan would put jobs where they run worst.
    .superRefine((rtts, ctx) => {
      for (const [near, far] of NEXT_DOMAINS)
        if (rtts[far] < rtts[near])
          ctx.addIssue({
            code: 'custom',
            path: [far],
            message:
              `${rtts[far]} µs is below ${near}'s ${rtts[near]} µs: round trips must not shrink with distance ` +
              '(same-instance ≤ placement-group ≤ zone ≤ cross-zone)',
          });
    })
    .default({
      'same-instance': DEFAULT_DOMAIN_RTT_MICROSECONDS['same-instance'],
      'placement-group': DEFAULT_DOMAIN_RTT_MICROSECONDS['placement-group'],
      zone: DEFAULT_DOMAIN_RTT_MICROSECONDS.zone,
      'cross-zone': DEFAULT_DOMAIN_RTT_MICROSECONDS['cross-zone'],
    }),
  /**
   * Multiplicative noise per instance pair, drawn anew every `intervalSeconds` (NoMora §6.1 scales its traces by
   * U[0.5, 1] within a rack, U[0.8, 1.2] beyond): within a placement group, and between instances further apart.
   * At least NoMora's own update period (1 s, digest §5.5): the simulation steps at every interval, so a shorter one
   * would only slow it to a crawl.
   */
  noise: z
    .strictObject({
      intervalSeconds: z
        .number()
        .min(MIN_NOISE_INTERVAL_SECONDS, 'must be ≥ 1 s (NoMora updates round trips every second)')
        .max(86_400, 'at most 86400 s')
        .default(60),
      withinPlacementGroup: range('factors', noiseFactor).default([0.5, 1]),
      betweenDomains: range('factors', noiseFactor).default([0.8, 1.2]),
    })
    .default({ intervalSeconds: 60, withinPlacementGroup: [0.5, 1], betweenDomains: [0.8, 1.2] }),
  /**
   * Congestion episodes (digest §10.5: ×2–×3 for 5–30 min): each instance's round trips are multiplied by a factor
   * during episodes that start as a Poisson process. Off by default.
   */
  episodes: z
    .strictObject({
      perInstancePerDay: z.number().min(0, 'must be ≥ 0').max(1000, 'at most 1000').default(0),
      durationMinutes: range('minutes', z.number().min(0).max(1440)).default([5, 30]),
      factor: range('factors', z.number().min(1).max(100)).default([2, 3]),
    })
    .default({ perInstancePerDay: 0, durationMinutes: [5, 30], factor: [2, 3] }),
  /** Workers report the maximum round trip over this window (digest §10.4: 60 s). */
  measurementWindowSeconds: z.number().positive('must be > 0 s').max(86_400).default(60),
  /**
   * `--latency-sensitive`: GiB per hour each generated latency-sensitive job exchanges between its tasks (billed when
   * it crosses zones). An assumption, not a measurement: set it for the workload at hand.
   */
  generatedGibPerHour: z
    .number()
    .finite()
    .nonnegative('must be ≥ 0')
    .max(1_000_000, 'at most 1000000 GiB per hour')
    .default(10),
});

/** The noise each domain's round trips are drawn with (none within an instance). */
const NOISE_FIELDS = {
  'same-instance': undefined,
  'placement-group': 'withinPlacementGroup',
  zone: 'betweenDomains',
  'cross-zone': 'betweenDomains',
} as const satisfies Record<keyof DomainRtts, 'withinPlacementGroup' | 'betweenDomains' | undefined>;

const inMicroseconds = (x: number): string => `${Number(x.toPrecision(6))} µs`;

/**
 * The domains whose noisy round trips a domain's must stay below: the next farther ones with a longer base round trip,
 * all of them when several share it. Domains given the same round trip as `near` are passed over: equal values declare
 * them alike, so noise ordering their pairs either way changes no preference of NoMora's. None when the next round trip
 * is shorter (out of order, named by domainRttMicroseconds alone).
 */
function nextLongerDomains(rtts: DomainRtts, near: keyof DomainRtts): (typeof FARTHER_DOMAINS)[number][] {
  const farther = FARTHER_DOMAINS.slice(DOMAINS.indexOf(near));
  const from = farther.findIndex((domain) => rtts[domain] !== rtts[near]);
  const first = farther[from];
  if (first === undefined || rtts[first] < rtts[near]) return [];
  const to = farther.findIndex((domain, k) => k > from && rtts[domain] !== rtts[first]);
  return farther.slice(from, to === -1 ? undefined : to);
}

/**
 * Noisy round trips keep the order of the base ones: a domain's highest (its round trip × its noise's high) is at most
 * the lowest (round trip × noise's low) of each next farther domain with a longer round trip, so no draw gives a nearer
 * pair a longer round trip than a farther one (congestion aside) and NoMora's preference for the nearer domain stays
 * right. Checking against the next longer round trip, not the next domain, keeps the order whole past domains declared
 * alike: with same-instance and placement-group both at 50 µs, a same-instance pair is checked against the zone's too.
 * Named by the noise of the nearer domain (the farther one's for a same-instance pair).
 */
function keepNoisyOrder(config: z.output<typeof networkConfigFields>, ctx: z.RefinementCtx): void {
  // A range refused on its own (a factor of 0, low above high) is told once, by its field.
  const { withinPlacementGroup, betweenDomains } = config.noise;
  if (![withinPlacementGroup, betweenDomains].every(([lo, hi]) => lo > 0 && lo <= hi)) return;
  const rtts = config.domainRttMicroseconds;
  const factors = (domain: keyof DomainRtts): readonly [number, number] => {
    const field = NOISE_FIELDS[domain];
    return field === undefined ? [1, 1] : config.noise[field];
  };
  const times = (domain: keyof DomainRtts, end: 'low' | 'high'): string => {
    const field = NOISE_FIELDS[domain];
    if (field === undefined) return '';
    const factor = config.noise[field][end === 'low' ? 0 : 1];
    return ` (${inMicroseconds(rtts[domain])} × ${field}${field.endsWith('s') ? "'" : "'s"} ${end} ${factor})`;
  };
  for (const near of DOMAINS)
    for (const far of nextLongerDomains(rtts, near)) {
      const highest = rtts[near] * factors(near)[1];
      const lowest = rtts[far] * factors(far)[0];
      // A relative margin, so that factors written in decimals (0.8 × 150) compare as written.
      if (highest <= lowest * (1 + 1e-9)) continue;
      ctx.addIssue({
        code: 'custom',
        path: ['noise', NOISE_FIELDS[near] ?? NOISE_FIELDS[far]],
        message:
          `${near} round trips reach ${inMicroseconds(highest)}${times(near, 'high')}, above ${far}'s lowest, ` +
          `${inMicroseconds(lowest)}${times(far, 'low')}: noisy round trips must not shrink with distance either (a domain's ` +
          "round trip × its noise's high ≤ the next farther domain's × its noise's low; domains given equal round " +
          'trips count as one)',
      });
    }
}

export const networkConfigSchema = networkConfigFields.superRefine(keepNoisyOrder);

export type NetworkConfigInput = z.input<typeof networkConfigSchema>;
type ParsedConfig = z.output<typeof networkConfigSchema>;

/** The simulated network with every default filled in and the zones named. */
export interface NetworkConfig {
  readonly zones: readonly string[];
  readonly domainRtts: DomainRtts;
  readonly noiseIntervalSeconds: number;
  readonly withinGroupNoise: readonly [number, number];
  readonly betweenDomainsNoise: readonly [number, number];
  readonly episodesPerInstancePerDay: number;
  readonly episodeSeconds: readonly [number, number];
  readonly episodeFactor: readonly [number, number];
  readonly measurementWindowSeconds: number;
  readonly generatedGibPerHour: number;
}

/**
 * Resolve a parsed config against the catalog's region; zones given as a count are named after it (`us-east-1a`,
 * `us-east-1b`, …), zones given by name must be its own (a plan's zone outside it could never be launched, and spot
 * pools, priced per zone of the region, would not be found). Throws a ValidationError of `--latency-config` naming
 * each zone that is not.
 */
export function resolveNetworkConfig(parsed: ParsedConfig, region: string): NetworkConfig {
  if (typeof parsed.zones !== 'number') {
    const problems = parsed.zones.flatMap((zone, i) =>
      isZoneOf(zone, region)
        ? []
        : [`zones.${i}: ${JSON.stringify(zone)} is not a zone of the catalog's region ${region}`],
    );
    if (problems.length > 0) throw new ValidationError('--latency-config', problems);
  }
  const zones =
    typeof parsed.zones === 'number'
      ? Array.from({ length: parsed.zones }, (_, i) => `${region}${String.fromCharCode(97 + i)}`)
      : parsed.zones;
  return {
    zones,
    domainRtts: parsed.domainRttMicroseconds,
    noiseIntervalSeconds: parsed.noise.intervalSeconds,
    withinGroupNoise: parsed.noise.withinPlacementGroup,
    betweenDomainsNoise: parsed.noise.betweenDomains,
    episodesPerInstancePerDay: parsed.episodes.perInstancePerDay,
    episodeSeconds: [parsed.episodes.durationMinutes[0] * 60, parsed.episodes.durationMinutes[1] * 60],
    episodeFactor: parsed.episodes.factor,
    measurementWindowSeconds: parsed.measurementWindowSeconds,
    generatedGibPerHour: parsed.generatedGibPerHour,
  };
}

/**
 * With spot on, the network's zones must share a spot pool with the catalog: instances land in the network's zones
 * only (NetworkWorld.place), so without one every run would buy on demand under spot's name, Eva and the baselines
 * alike. Throws a ValidationError of `--latency-config` naming both sets of zones (of `--spot` for the default
 * network, no file given). Nothing to check with spot off (`spot` undefined) or a catalog offering no pool at all.
 */
export function checkSpotZones(config: NetworkConfig, spot: SpotMarket | undefined, fromFile: boolean): void {
  const pooled = [...new Set((spot?.offerings ?? []).map((o) => o.zone))].sort();
  if (pooled.length === 0 || pooled.some((zone) => config.zones.includes(zone))) return;
  const zones = config.zones.join(', ');
  const pools = `the catalog's spot pools are in ${pooled.join(', ')}`;
  throw fromFile
    ? new ValidationError('--latency-config', [
        `zones: ${zones} have no spot pool (${pools}): with --spot on, no run could buy spot; name a zone with one`,
      ])
    : new ValidationError('--spot', [
        `on: the simulated network's default zones ${zones} have no spot pool (${pools}): give --latency-config ` +
          'zones that have one',
      ]);
}

/** The defaults (no file given). */
export function defaultNetworkConfig(region: string): NetworkConfig {
  return resolveNetworkConfig(networkConfigSchema.parse({}), region);
}
