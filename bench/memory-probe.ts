/**
 * Loaded into a process under measurement (`node --import ./bench/memory-probe.ts ...`): prints one line of
 * `process.memoryUsage()` to stderr every 250 ms, which bench/dataplane-weight.ts reads. Never used in production.
 * Keep it free of type syntax: the bench loads a .mjs copy, so that a compiled-JS node loads no TypeScript stripper.
 */
import { getHeapStatistics } from 'node:v8';

const PERIOD_MS = 250;
setInterval(() => {
  const m = process.memoryUsage();
  const h = getHeapStatistics();
  process.stderr.write(
    `MEMPROBE ${JSON.stringify({ rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, heapPhysical: h.total_physical_size, malloced: h.malloced_memory, external: m.external, arrayBuffers: m.arrayBuffers })}\n`,
  );
}, PERIOD_MS).unref();
