import { hostname } from 'node:os';
import { newWorkerToken } from '../protocol/launch-secret.js';
import type { RegisterRequest, RegisterResponse } from '../protocol/worker-protocol.js';
import type { AgentLogger, AgentOptions } from './agent-options.js';
import { ControllerRequestError } from './controller-client.js';

/**
 * Registering this instance with the controller (ARCHITECTURE.md "Worker identity"): with the saved per-instance token
 * first, else with the launch credential, proposing a per-instance token that is saved for the next restart.
 */

/** The controller's answer, and whether it came to the saved per-instance token (a registration made again). */
export interface InstanceRegistration {
  readonly answer: RegisterResponse;
  readonly again: boolean;
}

export class InstanceRegistrar {
  /** This process has sent a launch registration (its retries send it again, with the same token). */
  private proposed = false;
  /** The proposed token when there is no work directory to save it in. */
  private unsavedProposal: string | undefined;

  constructor(
    private readonly options: AgentOptions,
    private readonly log: AgentLogger,
  ) {}

  async register(): Promise<InstanceRegistration> {
    const request = {
      instanceId: this.options.cloudInstanceId,
      executor: this.options.executor.kind,
      hostname: hostname(),
    } satisfies RegisterRequest;
    const { credentials, connection } = this.options;
    // A saved token may be a registration completed before this process started: offered as such first. Once this
    // process has proposed one, its retries repeat the launch registration, which the controller answers again.
    let answer = this.proposed ? undefined : await this.reregister(request);
    const again = answer !== undefined;
    if (answer === undefined) {
      if (credentials.launch === undefined)
        throw new Error(
          'nothing to register with: no saved per-instance token (or the controller no longer knows it) and no launch ' +
            'credential (FLEETWISE_LAUNCH_SECRET in local mode, the worker token on EC2)',
        );
      const launch = await credentials.launch();
      // The token is chosen (and saved) before the request: an answer lost on the way is asked for again with it.
      const proposedToken = credentials.saved?.proposal() ?? (this.unsavedProposal ??= newWorkerToken());
      this.proposed = true;
      answer = await connection.register(launch.bearer, {
        ...request,
        identity: launch.identity,
        proposedToken,
      });
      // Saved before anything else: the launch credential will not register this instance again.
      try {
        credentials.saved?.save(answer.workerToken, answer.instanceId);
      } catch (e) {
        // Registered all the same; only a restart of this worker could not reclaim the instance.
        this.log.warn(
          `could not save the per-instance token (${(e as Error).message}): a restarted worker will not be able to ` +
            'register this instance again',
        );
      }
    }
    return { answer, again };
  }

  /** Register with the saved per-instance token; undefined when there is none or the controller does not know it. */
  private async reregister(request: RegisterRequest): Promise<RegisterResponse | undefined> {
    const saved = this.options.credentials.saved;
    const token = saved?.load();
    if (saved === undefined || token === undefined) return undefined;
    try {
      return await this.options.connection.register(token, {
        ...request,
        identity: { kind: 'instance-token' },
      });
    } catch (e) {
      // 401/403: a registration whose answer never came (the token is this worker's unanswered proposal), or a
      // controller whose state lost it (restored from an older backup); the launch credential proposes the same token.
      // Anything else (unreachable, 410) is the caller's to handle like any failure.
      if (!(e instanceof ControllerRequestError) || (e.statusCode !== 401 && e.statusCode !== 403)) throw e;
      this.log.warn(
        `the controller does not know the saved per-instance token (${e.message}); registering with the launch credential`,
      );
      return undefined;
    }
  }
}
