import type { FastifyInstance } from 'fastify';
import { HttpError } from './errors.js';

/**
 * Request bodies the API accepts. Fastify's own parsers are replaced so every body keeps its raw text (YAML specs
 * are validated from the text, which lets errors name lines) and malformed JSON is a 400 that names the problem.
 */
export type RequestBody =
  | { readonly kind: 'json'; readonly text: string; readonly value: unknown }
  | { readonly kind: 'yaml'; readonly text: string }
  | { readonly kind: 'archive'; readonly encoding: 'tar' | 'gzip'; readonly bytes: Buffer };

export const YAML_CONTENT_TYPES = [
  'application/yaml',
  'application/x-yaml',
  'text/yaml',
  'text/x-yaml',
  'text/plain',
] as const;
export const TAR_CONTENT_TYPE = 'application/x-tar';
export const GZIP_CONTENT_TYPES = ['application/gzip', 'application/x-gzip'] as const;

export function registerBodyParsers(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, { kind: 'json', text, value: undefined } satisfies RequestBody);
    try {
      done(null, { kind: 'json', text, value: JSON.parse(text) as unknown } satisfies RequestBody);
    } catch (e) {
      done(new HttpError(400, `malformed JSON body: ${(e as Error).message}`), undefined);
    }
  });
  app.addContentTypeParser([...YAML_CONTENT_TYPES], { parseAs: 'string' }, (_request, body, done) => {
    done(null, { kind: 'yaml', text: String(body) } satisfies RequestBody);
  });
  app.addContentTypeParser(TAR_CONTENT_TYPE, { parseAs: 'buffer' }, (_request, body, done) => {
    done(null, { kind: 'archive', encoding: 'tar', bytes: body as Buffer } satisfies RequestBody);
  });
  app.addContentTypeParser([...GZIP_CONTENT_TYPES], { parseAs: 'buffer' }, (_request, body, done) => {
    done(null, { kind: 'archive', encoding: 'gzip', bytes: body as Buffer } satisfies RequestBody);
  });
}

/** The parsed body, or undefined when the request had none. */
export function bodyOf(body: unknown): RequestBody | undefined {
  return typeof body === 'object' && body !== null && 'kind' in body ? (body as RequestBody) : undefined;
}
