import {
  CreatePlacementGroupCommand,
  DeletePlacementGroupCommand,
  DescribeInstancesCommand,
  DescribeInstanceTypesCommand,
  DescribePlacementGroupsCommand,
  EC2Client,
  RunInstancesCommand,
  TerminateInstancesCommand,
  type CreatePlacementGroupCommandInput,
  type CreatePlacementGroupCommandOutput,
  type DeletePlacementGroupCommandInput,
  type DeletePlacementGroupCommandOutput,
  type DescribeInstancesCommandInput,
  type DescribeInstancesCommandOutput,
  type DescribeInstanceTypesCommandInput,
  type DescribeInstanceTypesCommandOutput,
  type DescribePlacementGroupsCommandInput,
  type DescribePlacementGroupsCommandOutput,
  type RunInstancesCommandInput,
  type RunInstancesCommandOutput,
  type TerminateInstancesCommandInput,
  type TerminateInstancesCommandOutput,
} from '@aws-sdk/client-ec2';
import {
  commonClientConfig,
  DEFAULT_API_TIMEOUTS,
  timeoutHandlerOptions,
  type AwsClientOptions,
  type ClientTimeouts,
} from './client-config.js';

/**
 * The EC2 calls fleetwise makes, one method each: a thin wrapper over the SDK client's send. It is the seam where
 * tests inject what moto cannot produce (InsufficientInstanceCapacity, RequestLimitExceeded) and count calls.
 */
export interface Ec2Api {
  runInstances(input: RunInstancesCommandInput): Promise<RunInstancesCommandOutput>;
  describeInstances(input: DescribeInstancesCommandInput): Promise<DescribeInstancesCommandOutput>;
  terminateInstances(input: TerminateInstancesCommandInput): Promise<TerminateInstancesCommandOutput>;
  describeInstanceTypes(
    input: DescribeInstanceTypesCommandInput,
  ): Promise<DescribeInstanceTypesCommandOutput>;
  /** Cluster placement groups for latency-sensitive jobs (placement-groups.ts). */
  createPlacementGroup(input: CreatePlacementGroupCommandInput): Promise<CreatePlacementGroupCommandOutput>;
  describePlacementGroups(
    input: DescribePlacementGroupsCommandInput,
  ): Promise<DescribePlacementGroupsCommandOutput>;
  deletePlacementGroup(input: DeletePlacementGroupCommandInput): Promise<DeletePlacementGroupCommandOutput>;
}

/**
 * An EC2 client from the SDK's standard configuration, honouring AWS_ENDPOINT_URL_EC2 / AWS_ENDPOINT_URL, with
 * timeouts (DEFAULT_API_TIMEOUTS unless overridden) so a hung endpoint cannot hold a round.
 */
export function createEc2Client(
  options: AwsClientOptions & { readonly timeouts?: Partial<ClientTimeouts> } = {},
  env: NodeJS.ProcessEnv = process.env,
): EC2Client {
  return new EC2Client({
    ...commonClientConfig('EC2', options, env),
    requestHandler: timeoutHandlerOptions({ ...DEFAULT_API_TIMEOUTS, ...options.timeouts }),
  });
}

export function ec2ApiFromClient(client: EC2Client): Ec2Api {
  return {
    runInstances: (input) => client.send(new RunInstancesCommand(input)),
    describeInstances: (input) => client.send(new DescribeInstancesCommand(input)),
    terminateInstances: (input) => client.send(new TerminateInstancesCommand(input)),
    describeInstanceTypes: (input) => client.send(new DescribeInstanceTypesCommand(input)),
    createPlacementGroup: (input) => client.send(new CreatePlacementGroupCommand(input)),
    describePlacementGroups: (input) => client.send(new DescribePlacementGroupsCommand(input)),
    deletePlacementGroup: (input) => client.send(new DeletePlacementGroupCommand(input)),
  };
}
