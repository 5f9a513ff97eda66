/** Status recorded (metrics, logs, usage) when the client went away before its answer was complete (nginx's 499). */
export const CLIENT_CLOSED = 499;

/**
 * The client closed its connection while its request waited (held for a cold start, queued for a replica slot):
 * there is no one to answer, and it is counted as 499, not as a failure of ours.
 */
export class ClientGoneError extends Error {
  constructor(while_: string) {
    super(`The client went away while the request ${while_}.`);
    this.name = 'ClientGoneError';
  }
}
