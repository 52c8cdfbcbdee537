import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { ValidationError, parseWith } from '../../core/validation.js';
import { PROJECT_ROOT } from '../catalog-file.js';

export const WORKER_USER_DATA_TEMPLATE_PATH = join(PROJECT_ROOT, 'infra', 'worker-user-data.sh');

/** EC2 accepts at most 16 KiB of user data before base64 encoding. */
export const MAX_USER_DATA_BYTES = 16 * 1024;

/** Node.js the bootstrap installs when the AMI lacks Node ≥ 20 (package.json engines: >=20.19). */
export const DEFAULT_WORKER_NODE_VERSION = '20.19.0';

// Values are pasted into a shell script inside single quotes: no quotes, whitespace or shell metacharacters.
const shellSafe = /^[A-Za-z0-9@%+=:,./_~-]+$/;

export const workerBootstrapSchema = z.object({
  /** Where workers reach the controller's API. */
  controllerUrl: z
    .string()
    .regex(/^https?:\/\/[^\s'"`$\\]+$/, 'an http(s) URL without quotes or spaces')
    .refine((u) => URL.canParse(u), 'not a valid URL'),
  /** The shared secret workers present to the controller. */
  workerToken: z
    .string()
    .min(16, 'at least 16 characters')
    .max(512)
    .regex(shellSafe, 'letters, digits and @%+=:,./_~-'),
  /** What `npm install -g` installs on the instance: a version spec or a tarball URL. */
  packageSpec: z.string().regex(shellSafe, 'an npm package spec or URL without quotes or spaces').optional(),
  nodeVersion: z
    .string()
    .regex(/^\d+\.\d+\.\d+$/, 'a Node.js version like 20.19.0')
    .default(DEFAULT_WORKER_NODE_VERSION),
  /** Another template (same placeholders); defaults to infra/worker-user-data.sh. */
  templatePath: z.string().min(1).optional(),
});
export type WorkerBootstrap = z.input<typeof workerBootstrapSchema>;

/** Replace every {{NAME}} in `template`; a placeholder without a value is an error, never left in the script. */
export function renderTemplate(
  template: string,
  values: Readonly<Record<string, string>>,
  source: string,
): string {
  const missing = new Set<string>();
  const rendered = template.replace(/\{\{([A-Z][A-Z0-9_]*)\}\}/g, (_match, name: string) => {
    const value = values[name];
    if (value === undefined) {
      missing.add(name);
      return '';
    }
    return value;
  });
  if (missing.size > 0)
    throw new ValidationError(
      source,
      [...missing].map((name) => `{{${name}}}: no value for this placeholder`),
    );
  return rendered;
}

function ownPackageSpec(): string {
  const pkg = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
    name?: string;
    version?: string;
  };
  return `${pkg.name ?? 'fleetwise'}@${pkg.version ?? 'latest'}`;
}

/** The worker bootstrap script for EC2 user data, base64-encoded as RunInstances expects. */
export function workerUserDataBase64(bootstrap: WorkerBootstrap, source = 'worker bootstrap'): string {
  const config = parseWith(workerBootstrapSchema, bootstrap, source);
  const templatePath = config.templatePath ?? WORKER_USER_DATA_TEMPLATE_PATH;
  let template: string;
  try {
    template = readFileSync(templatePath, 'utf8');
  } catch (e) {
    throw new ValidationError(templatePath, [`cannot read the user-data template: ${(e as Error).message}`]);
  }
  const script = renderTemplate(
    template,
    {
      CONTROLLER_URL: config.controllerUrl,
      WORKER_TOKEN: config.workerToken,
      FLEETWISE_PACKAGE: config.packageSpec ?? ownPackageSpec(),
      NODE_VERSION: config.nodeVersion,
    },
    templatePath,
  );
  const bytes = Buffer.byteLength(script, 'utf8');
  if (bytes > MAX_USER_DATA_BYTES)
    throw new ValidationError(templatePath, [
      `rendered user data is ${bytes} bytes; EC2 allows ${MAX_USER_DATA_BYTES}`,
    ]);
  return Buffer.from(script, 'utf8').toString('base64');
}
