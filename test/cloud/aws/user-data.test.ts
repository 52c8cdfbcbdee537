import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/core/validation.js';
import {
  renderTemplate,
  WORKER_USER_DATA_TEMPLATE_PATH,
  workerUserDataBase64,
} from '../../../src/cloud/aws/user-data.js';

const valid = { controllerUrl: 'https://controller.internal:8443', workerToken: 'abcdefghijklmnop-0123' };
const decode = (b64: string): string => Buffer.from(b64, 'base64').toString('utf8');

/** Template files written by the tests, removed after them. */
const scratch: string[] = [];
function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fleetwise-user-data-'));
  scratch.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

describe('worker user data', () => {
  it('fills every placeholder of infra/worker-user-data.sh, defaulting the package to this version', () => {
    const script = decode(workerUserDataBase64(valid));
    expect(script.startsWith('#!/bin/bash\n')).toBe(true);
    expect(script).toContain("CONTROLLER_URL='https://controller.internal:8443'");
    expect(script).toContain("WORKER_TOKEN='abcdefghijklmnop-0123'");
    expect(script).toContain("FLEETWISE_PACKAGE='fleetwise@0.1.0'");
    expect(script).toContain("NODE_VERSION='20.19.0'");
    expect(script).toContain('systemctl enable --now fleetwise-worker.service');
    expect(script).toContain('X-aws-ec2-metadata-token'); // IMDSv2 for the instance id
    expect(script).not.toMatch(/\{\{[A-Z_]+\}\}/);
    expect(WORKER_USER_DATA_TEMPLATE_PATH.endsWith(join('infra', 'worker-user-data.sh'))).toBe(true);
  });

  it("passes the worker token in the worker's root-only environment file, never on its command line", () => {
    const script = decode(workerUserDataBase64(valid));
    // A command line is readable by every process on the host (/proc/<pid>/cmdline); the env file is root's.
    const execStart = script.split('\n').find((l) => l.startsWith('ExecStart='));
    expect(execStart).toBeDefined();
    expect(execStart).not.toMatch(/--token|WORKER_TOKEN/);
    expect(script).toContain('FLEETWISE_WORKER_TOKEN=${WORKER_TOKEN}');
    expect(script).toContain('chmod 0600 /etc/fleetwise/worker.env');
  });

  it.each([
    [{ controllerUrl: "http://x/'; rm -rf /" }, /controllerUrl/],
    [{ controllerUrl: 'ftp://x' }, /controllerUrl/],
    [{ workerToken: 'short' }, /workerToken: at least 16/],
    [{ workerToken: "abcdefghijklmnop'" }, /workerToken/],
    [{ packageSpec: 'fleetwise@1 && curl evil' }, /packageSpec/],
    [{ nodeVersion: '20' }, /nodeVersion/],
  ])('rejects unsafe or malformed values (%j)', (override, reason) => {
    expect(() => workerUserDataBase64({ ...valid, ...override })).toThrow(reason);
  });

  it('refuses a template with an unknown placeholder, naming it', () => {
    const dir = scratchDir();
    const templatePath = join(dir, 'custom.sh');
    writeFileSync(templatePath, '#!/bin/sh\necho {{CONTROLLER_URL}} {{REGION}}\n');
    const error = (() => {
      try {
        workerUserDataBase64({ ...valid, templatePath });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).source).toBe(templatePath);
    expect((error as ValidationError).problems).toEqual(['{{REGION}}: no value for this placeholder']);
  });

  it("refuses user data over EC2's 16 KiB limit", () => {
    const dir = scratchDir();
    const templatePath = join(dir, 'huge.sh');
    writeFileSync(templatePath, `#!/bin/sh\n# ${'x'.repeat(16 * 1024)}\n`);
    expect(() => workerUserDataBase64({ ...valid, templatePath })).toThrow(/EC2 allows 16384/);
  });

  it('renders placeholders anywhere and repeatedly', () => {
    expect(renderTemplate('{{A}}-{{B}}-{{A}}', { A: '1', B: '2' }, 't')).toBe('1-2-1');
    expect(renderTemplate('no placeholders {x} {{lower}}', {}, 't')).toBe('no placeholders {x} {{lower}}');
  });
});
