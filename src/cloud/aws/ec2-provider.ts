import type { Market } from '../../core/market.js';
import { Rng } from '../../core/random.js';
import { parseWith } from '../../core/validation.js';
import {
  launchRequestSchema,
  TAG_CLUSTER,
  type CloudInstance,
  type CloudProvider,
  type LaunchRequest,
  type LaunchResult,
  type ListOptions,
} from '../provider.js';
import { CapacityErrorCache } from './capacity-error-cache.js';
import type { AwsClientOptions } from './client-config.js';
import { describeInstances, INSTANCE_ID, LIVE_STATES, oldestFirst } from './describe-instances.js';
import { createEc2Client, ec2ApiFromClient, type Ec2Api } from './ec2-api.js';
import type { Ec2Calls } from './ec2-calls.js';
import {
  ec2ProviderConfigSchema,
  type Ec2ProviderConfig,
  type ParsedEc2ProviderConfig,
} from './ec2-provider-config.js';
import { InstanceLauncher } from './instance-launcher.js';
import { findEarlierLaunch } from './launch-idempotency.js';
import { PlacementGroups } from './placement-groups.js';
import { terminateInstances } from './terminate-instances.js';
import { realSleep, retryOnThrottling, type RetryDeps } from './throttling.js';
import { workerUserDataBase64 } from './user-data.js';

export interface Ec2ProviderDeps {
  readonly api: Ec2Api;
  readonly nowMs?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
  /** Jitter for throttling backoff. */
  readonly rng?: Rng;
}

/**
 * CloudProvider on EC2. Launches are idempotent twice over: the ClientToken makes EC2 itself return the original
 * instance, and before launching we look for an instance already tagged with the launch token (EC2 stand-ins such as
 * moto ignore ClientToken; a controller restarted between RunInstances and recording its result relies on this too).
 * The tags are applied by RunInstances itself, so no instance ever exists without them.
 */
export class Ec2Provider implements CloudProvider {
  private readonly config: ParsedEc2ProviderConfig;
  private readonly ec2: Ec2Calls;
  private readonly capacityErrors: CapacityErrorCache;
  /** How long a capacity error or an interruption notice keeps an offering closed (`capacityErrorTtlSeconds`). */
  readonly unavailableOfferingSeconds: number;
  private readonly placementGroups: PlacementGroups;
  private readonly launcher: InstanceLauncher;

  constructor(config: Ec2ProviderConfig, deps: Ec2ProviderDeps) {
    this.config = parseWith(ec2ProviderConfigSchema, config, 'EC2 provider configuration');
    const retry: RetryDeps = {
      policy: this.config.throttling,
      sleep: deps.sleep ?? realSleep,
      rng: deps.rng ?? new Rng(0x5eed),
    };
    this.ec2 = { api: deps.api, call: (operation, fn) => retryOnThrottling(operation, fn, retry) };
    this.unavailableOfferingSeconds = this.config.capacityErrorTtlSeconds;
    this.capacityErrors = new CapacityErrorCache(this.unavailableOfferingSeconds, deps.nowMs ?? Date.now);
    // Rendered once: a bad template or value fails at startup, not at the first launch.
    const userDataBase64 =
      this.config.worker === undefined
        ? undefined
        : workerUserDataBase64(this.config.worker, 'EC2 provider worker');
    this.placementGroups = new PlacementGroups(this.ec2);
    this.launcher = new InstanceLauncher(
      this.config,
      this.ec2,
      this.capacityErrors,
      this.placementGroups,
      userDataBase64,
    );
  }

  /** A provider using the SDK's standard configuration (credential chain, AWS_ENDPOINT_URL_EC2, …). */
  static fromEnvironment(config: Ec2ProviderConfig, clientOptions: AwsClientOptions = {}): Ec2Provider {
    const client = createEc2Client({ region: config.region, ...clientOptions });
    return new Ec2Provider(config, { api: ec2ApiFromClient(client) });
  }

  /**
   * Launch in the request's market, with the launcher's fallbacks (InstanceLauncher.launch), unless an earlier
   * attempt of the same launch made its instances already: those are returned instead.
   */
  async launch(input: LaunchRequest): Promise<LaunchResult> {
    const request = parseWith(launchRequestSchema, input, 'launch request');
    const existing = await findEarlierLaunch(this.ec2, this.config, request);
    if (existing.length > 0)
      return {
        instanceIds: existing.map((i) => i.instanceId),
        availabilityZone: existing[0]?.availabilityZone,
        placementGroup: existing[0]?.placementGroup,
        reusedExisting: true,
        ...(existing[0]?.market === 'spot' ? { market: 'spot' } : {}),
      };
    return this.launcher.launch(request);
  }

  deletePlacementGroups(clusterName: string, keep: ReadonlySet<string>): Promise<string[]> {
    return this.placementGroups.deleteUnused(clusterName, keep);
  }

  markOfferingUnavailable(typeName: string, zone: string, market: Market, sinceSeconds?: number): void {
    this.capacityErrors.markUnavailable(
      typeName,
      zone,
      market,
      sinceSeconds === undefined ? undefined : sinceSeconds * 1000,
    );
  }

  isCapacityConstrained(typeName: string, market: Market = 'on-demand'): boolean {
    return this.config.placements.every((p) =>
      this.capacityErrors.isUnavailable(typeName, p.availabilityZone, market),
    );
  }

  async list(clusterName: string, options: ListOptions = {}): Promise<CloudInstance[]> {
    // Only filters moto implements too: tag:<key> and instance-state-name (its availability-zone filter is broken).
    const filters = [{ Name: `tag:${TAG_CLUSTER}`, Values: [clusterName] }];
    if (options.includeTerminated !== true)
      filters.push({ Name: 'instance-state-name', Values: [...LIVE_STATES] });
    return (await describeInstances(this.ec2, this.config.listPageSize, filters, 'DescribeInstances')).sort(
      oldestFirst,
    );
  }

  /**
   * One instance of the cluster, in any state, as EC2 describes it now (type, zone, image, owner): what a worker's
   * signed instance identity document is checked against when it registers. Undefined when EC2 has no instance with
   * that id and the cluster's tag.
   */
  async describeInstance(clusterName: string, instanceId: string): Promise<CloudInstance | undefined> {
    if (!INSTANCE_ID.test(instanceId)) return undefined;
    const found = await describeInstances(
      this.ec2,
      this.config.listPageSize,
      [
        { Name: 'instance-id', Values: [instanceId] },
        { Name: `tag:${TAG_CLUSTER}`, Values: [clusterName] },
      ],
      'DescribeInstances (worker identity)',
    );
    return found.find((i) => i.instanceId === instanceId);
  }

  terminate(instanceIds: readonly string[]): Promise<void> {
    return terminateInstances(this.ec2, instanceIds);
  }
}
