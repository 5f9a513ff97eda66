/**
 * Node/V8 flags the data-plane process is started with (package.json start/dev, infra/docker/Dockerfile,
 * scripts/start.ts and the benches pass these; V8 reads them only at start-up, so the process cannot set them itself).
 *
 * `--max-semi-space-size=4` (MiB): V8's young generation otherwise grows to 32 MiB per semi-space under a
 * high allocation rate and stays there; holding 1,000 slow streams that took the node from about 140 to
 * 217-282 MiB of RSS, against 125 -> 162 MiB with a 2 MiB cap (bench/dataplane-weight.ts, bench/RESULTS.md).
 * The cost of a small cap is more frequent scavenges. 2 MiB until the seventh session; since the node's own HTTP/1.1
 * client (upstream/h1-pool.ts) took about 13 MiB off the 1,000-stream peak, 4 MiB fits under the 143 MiB target (peak
 * 120-126 MiB, back to 101-107 20 s after) and cost 3-9% less CPU per request in two same-run comparisons of two
 * copies each (bench/RESULTS.md, seventh session).
 */
export const DATAPLANE_NODE_FLAGS: readonly string[] = Object.freeze(['--max-semi-space-size=4']);

/**
 * Environment the data-plane process is started with, by the same launchers (glibc reads it before `main`, so the
 * process cannot set it itself either; the Dockerfile sets it in the data-plane image, which Kubernetes and
 * compose run).
 *
 * `MALLOC_ARENA_MAX=2`: glibc otherwise gives each thread that allocates (V8's platform and GC workers, libuv's
 * pool) its own malloc arena, up to 8 per core, and memory freed in one arena is not reused by another. Holding
 * 1,000 streams, peak RSS was 10 to 27 MiB lower with it in four same-run comparisons (bench/RESULTS.md, "Memory at
 * 1,000 streams (second session)"), CPU per request within the run-to-run noise. MALLOC_TRIM_THRESHOLD_ and
 * MALLOC_MMAP_THRESHOLD_ were measured too and are not set: no steady gain, more kernel time per stream in two runs.
 */
export const DATAPLANE_NODE_ENV: Readonly<Record<string, string>> = Object.freeze({ MALLOC_ARENA_MAX: '2' });
