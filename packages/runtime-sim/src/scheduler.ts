/**
 * A job starts when it gets a batch slot and `fits()` (its KV blocks, taken there) says yes; it must call
 * `release()` exactly once when done. Waiting jobs start in arrival order: one that does not fit holds the
 * ones behind it (vLLM's FCFS scheduling).
 */
export type Job = (() => void) & { readonly fits?: () => boolean };

export interface Scheduler {
  /** Starts the job now, queues it, or returns false when the queue is full. */
  submit(job: Job): boolean;
  /** Removes a job that is still waiting. */
  cancel(job: Job): void;
  /** Frees a slot and starts the next waiting job. */
  release(): void;
  /** Lets jobs start (after cold start). */
  open(): void;
  /** Tries the waiting queue again (memory was freed without a slot being released). */
  poke(): void;
  readonly running: number;
  readonly waiting: number;
  /** Most jobs ever running at once. */
  readonly peakRunning: number;
  /** Most jobs ever accepted and unfinished at once (running plus waiting). */
  readonly peakInFlight: number;
}

/** Batch slots plus a bounded FIFO waiting queue; starts closed until `open()`. */
export function createScheduler(slots: number, maxQueue: number): Scheduler {
  let running = 0;
  let isOpen = false;
  let pumping = false;
  let peakRunning = 0;
  let peakInFlight = 0;
  const queue: Job[] = [];
  const note = (): void => {
    if (running > peakRunning) peakRunning = running;
    if (running + queue.length > peakInFlight) peakInFlight = running + queue.length;
  };

  function pump(): void {
    if (pumping) return;
    pumping = true;
    try {
      while (isOpen && running < slots && queue.length > 0 && (queue[0]!.fits?.() ?? true)) {
        const job = queue.shift()!;
        running++;
        note();
        job();
      }
    } finally {
      pumping = false;
    }
  }

  return {
    submit(job) {
      if (isOpen && running < slots && queue.length === 0 && (job.fits?.() ?? true)) {
        running++;
        note();
        job();
        return true;
      }
      if (queue.length >= maxQueue) return false;
      queue.push(job);
      note();
      return true;
    },
    cancel(job) {
      const i = queue.indexOf(job);
      if (i >= 0) queue.splice(i, 1);
    },
    release() {
      running--;
      pump();
    },
    open() {
      isOpen = true;
      pump();
    },
    poke: pump,
    get running() {
      return running;
    },
    get waiting() {
      return queue.length;
    },
    get peakRunning() {
      return peakRunning;
    },
    get peakInFlight() {
      return peakInFlight;
    },
  };
}
