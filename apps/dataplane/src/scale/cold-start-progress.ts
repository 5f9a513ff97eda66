/**
 * Where a held request stands: `queued` until the control plane has taken the wake (or the snapshot shows
 * replicas starting), `starting` while replicas boot, `loading` once a replica is ready and the request
 * waits for its turn behind earlier held requests.
 */
export type ColdStartPhase = 'queued' | 'starting' | 'loading';

/**
 * One SSE comment line of cold-start progress. Comments (lines starting with ':') are ignored by every SSE
 * client, the OpenAI SDKs included, so a held stream shows progress without changing what clients parse.
 */
export function coldStartComment(phase: ColdStartPhase, elapsedMs: number, etaMs: number): string {
  return `: cold-start phase=${phase} elapsed_ms=${Math.round(elapsedMs)} eta_ms=${Math.round(etaMs)}\n\n`;
}
