import { DeleteMessageBatchCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import {
  parseInterruptionMessage,
  type AcknowledgeFailure,
  type InterruptionEventSource,
  type ReceivedInterruption,
} from '../interruption-events.js';
import {
  awsErrorCode,
  commonClientConfig,
  DEFAULT_API_TIMEOUTS,
  timeoutHandlerOptions,
  type AwsClientOptions,
} from './client-config.js';
import { CloudProviderError } from '../provider.js';

/**
 * The SQS queue EventBridge routes EC2's interruption events to (infra: a rule on `aws.ec2` spot interruption
 * warnings and rebalance recommendations targeting the queue). Long polling keeps the controller's reaction within a
 * second or so of the event while costing one request per wait.
 */
export interface SqsInterruptionQueueOptions extends AwsClientOptions {
  readonly queueUrl: string;
  /** Long-poll time per receive (SQS: 0–20 s; default 10). */
  readonly waitSeconds?: number;
}

export function createSqsClient(options: AwsClientOptions, env: NodeJS.ProcessEnv = process.env): SQSClient {
  // A long poll holds the request up to 20 s (SQS's maximum), so the request timeout sits above it.
  return new SQSClient({
    ...commonClientConfig('SQS', options, env),
    requestHandler: timeoutHandlerOptions({
      ...DEFAULT_API_TIMEOUTS,
      requestTimeoutMs: 40_000,
      idleTimeoutMs: 40_000,
    }),
  });
}

export class SqsInterruptionQueue implements InterruptionEventSource {
  private readonly client: SQSClient;

  constructor(
    private readonly options: SqsInterruptionQueueOptions,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.client = createSqsClient(options, env);
  }

  async receive(signal?: AbortSignal): Promise<ReceivedInterruption[]> {
    try {
      const answer = await this.client.send(
        new ReceiveMessageCommand({
          QueueUrl: this.options.queueUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: this.options.waitSeconds ?? 10,
        }),
        signal === undefined ? {} : { abortSignal: signal },
      );
      const out: ReceivedInterruption[] = [];
      for (const m of answer.Messages ?? []) {
        if (m.ReceiptHandle === undefined) continue;
        const parsed = parseInterruptionMessage(m.Body ?? '');
        out.push({ messageId: m.MessageId ?? '?', receipt: m.ReceiptHandle, ...parsed });
      }
      return out;
    } catch (e) {
      throw new CloudProviderError(
        `receiving from the interruption queue ${this.options.queueUrl} failed: ${(e as Error).message}`,
        awsErrorCode(e),
        { cause: e },
      );
    }
  }

  async acknowledge(receipts: readonly string[]): Promise<readonly AcknowledgeFailure[]> {
    const failed: AcknowledgeFailure[] = [];
    for (let i = 0; i < receipts.length; i += 10) {
      const batch = receipts.slice(i, i + 10);
      let answer;
      try {
        answer = await this.client.send(
          new DeleteMessageBatchCommand({
            QueueUrl: this.options.queueUrl,
            Entries: batch.map((r, n) => ({ Id: String(n), ReceiptHandle: r })),
          }),
        );
      } catch (e) {
        // Not deleted: the message comes back after its visibility timeout and is acted on again, which changes
        // nothing (an instance already draining stays so).
        throw new CloudProviderError(
          `deleting messages from the interruption queue failed: ${(e as Error).message}`,
          awsErrorCode(e),
          { cause: e },
        );
      }
      // A batch succeeds as a request while some of its entries fail (an expired receipt handle): those are named.
      for (const f of answer.Failed ?? []) {
        const receipt = batch[Number(f.Id)];
        if (receipt === undefined) continue;
        failed.push({ receipt, reason: `${f.Code ?? 'unknown'}: ${f.Message ?? 'no message'}` });
      }
    }
    return failed;
  }

  close(): void {
    this.client.destroy();
  }
}
