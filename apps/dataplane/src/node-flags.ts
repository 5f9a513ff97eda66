/**
 * Node/V8 flags the data-plane process is started with (package.json start/dev, infra/docker/Dockerfile,
 * scripts/start.ts and the benches pass these; V8 reads them only at start-up, so the process cannot set them itself).
 *
 * `--max-semi-space-size=2` (MiB): V8's young generation otherwise grows to 32 MiB per semi-space under a
 * high allocation rate and stays there; holding 1,000 slow streams that took the node from about 140 to
 * 217-282 MiB of RSS, against 125 -> 162 MiB with this cap (bench/dataplane-weight.ts, bench/RESULTS.md).
 * The cost is more frequent scavenges: within the run-to-run noise of CPU per request in the same run
 * (1 MiB cost 5 to 15% more CPU per request, hence 2).
 */
export const DATAPLANE_NODE_FLAGS: readonly string[] = Object.freeze(['--max-semi-space-size=2']);
