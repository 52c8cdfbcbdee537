import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import {
  EC2_ONLY_FLAGS,
  ec2OnlyFlagProblems,
  FLAG_PATHS,
  flagNameOf,
  type ControllerFlags,
} from '../../src/controller/config-flags.js';

/** The controller flags that configure EC2 alone, each refused by name in local mode. */

const EVERY_EC2_ONLY: ControllerFlags = {
  ami: 'ami-0123456789abcdef0',
  subnets: 'subnet-0123456789abcdef0',
  securityGroups: 'sg-0123456789abcdef0',
  instanceProfile: 'fleetwise-worker',
  keyName: 'foo',
  userDataTemplate: 'infra/worker-user-data.sh',
  identityCertificate: 'cert.pem',
  interruptionQueue: 'https://sqs.us-east-1.amazonaws.com/123456789012/q',
};

describe('EC2-only controller flags', () => {
  it('in local mode, each given is one problem naming it; with aws (or by default) none', () => {
    const problems = ec2OnlyFlagProblems(
      { ...EVERY_EC2_ONLY, workerControllerUrl: 'http://10.0.0.5:7070', region: 'us-east-1' },
      'local',
    );
    expect(problems).toEqual(
      [
        '--ami',
        '--subnets',
        '--security-groups',
        '--instance-profile',
        '--key-name',
        '--user-data-template',
        '--identity-certificate',
        '--interruption-queue',
      ].map(
        (flag) =>
          `${flag} applies to --provider aws only: local mode launches no EC2 instance (leave it out)`,
      ),
    );
    expect(ec2OnlyFlagProblems(EVERY_EC2_ONLY, 'aws')).toEqual([]);
    expect(ec2OnlyFlagProblems(EVERY_EC2_ONLY, undefined)).toEqual([]);
    expect(ec2OnlyFlagProblems({ workerControllerUrl: 'http://10.0.0.5:7070' }, 'local')).toEqual([]);
  });

  it('are flags of `fleetwise controller`, and every flag of the ec2 section but where workers reach the API', async () => {
    const program = await buildProgram(false, 'controller');
    const taken = new Set(program.commands[0]?.options.map((o) => o.long));
    for (const flag of EC2_ONLY_FLAGS) expect(taken, flagNameOf(flag)).toContain(flagNameOf(flag));
    const ec2Section = FLAG_PATHS.filter(([, path]) => path[0] === 'ec2').map(([flag]) => flag);
    expect(ec2Section.filter((flag) => !EC2_ONLY_FLAGS.includes(flag))).toEqual(['workerControllerUrl']);
  });
});
