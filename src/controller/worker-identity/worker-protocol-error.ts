/** A worker-protocol request refused, with the HTTP status the API answers (routes-workers.ts). */
export class WorkerProtocolError extends Error {
  constructor(
    readonly statusCode: 401 | 403 | 404 | 409 | 410,
    message: string,
  ) {
    super(message);
    this.name = 'WorkerProtocolError';
  }
}
