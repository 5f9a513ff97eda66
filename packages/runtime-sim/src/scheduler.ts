/** A job starts when it gets a batch slot; it must call `release()` exactly once when done. */
export type Job = () => void;

export interface Scheduler {
  /** Starts the job now, queues it, or returns false when the queue is full. */
  submit(job: Job): boolean;
  /** Removes a job that is still waiting. */
  cancel(job: Job): void;
  /** Frees a slot and starts the next waiting job. */
  release(): void;
  /** Lets jobs start (after cold start). */
  open(): void;
  readonly running: number;
  readonly waiting: number;
}

/** Batch slots plus a bounded FIFO waiting queue; starts closed until `open()`. */
export function createScheduler(slots: number, maxQueue: number): Scheduler {
  let running = 0;
  let isOpen = false;
  let pumping = false;
  const queue: Job[] = [];

  function pump(): void {
    if (pumping) return;
    pumping = true;
    try {
      while (isOpen && running < slots && queue.length > 0) {
        const job = queue.shift()!;
        running++;
        job();
      }
    } finally {
      pumping = false;
    }
  }

  return {
    submit(job) {
      if (isOpen && running < slots && queue.length === 0) {
        running++;
        job();
        return true;
      }
      if (queue.length >= maxQueue) return false;
      queue.push(job);
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
    get running() {
      return running;
    },
    get waiting() {
      return queue.length;
    },
  };
}
