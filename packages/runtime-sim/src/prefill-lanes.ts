/** Prefill compute of one engine: `lanes` prompts at a time, each lane busy until its last prompt is done. */
export interface PrefillLanes {
  /** Reserves the work for `tokens` uncached prompt tokens; returns ms from now until that prefill is done. */
  schedule(tokens: number): number;
}

/** `lanes` 0: no contention (each prefill takes its own time only). */
export function createPrefillLanes(lanes: number, msPerToken: number): PrefillLanes {
  const busyUntil = new Float64Array(Math.max(1, lanes));
  return {
    schedule(tokens) {
      const cost = tokens * msPerToken;
      if (lanes === 0 || cost === 0) return cost;
      let best = 0;
      for (let i = 1; i < busyUntil.length; i++) if (busyUntil[i]! < busyUntil[best]!) best = i;
      const now = performance.now();
      const end = Math.max(now, busyUntil[best]!) + cost;
      busyUntil[best] = end;
      return end - now;
    },
  };
}
