// A 60 s sliding window kept in 60 one-second sub-windows (slots). A charge counts from the slot it
// was made in until that slot leaves the window: for 59 to 60 s. The Redis script mirrors this exactly.

export const SLOT_MS = 1000;
export const SLOTS = 60;
export const WINDOW_MS = SLOT_MS * SLOTS;

/** One counter (requests or tokens of one key); `oldest` is the oldest slot that may be non-zero. */
export interface WindowCounter {
  readonly slots: Float64Array;
  total: number;
  oldest: number;
}

export const createWindowCounter = (): WindowCounter => ({ slots: new Float64Array(SLOTS), total: 0, oldest: 0 });

/** Drops the slots that left the window at slot `cur` (amortised O(1)). */
export function advance(c: WindowCounter, cur: number): void {
  if (c.total <= 0) {
    // total is the sum of non-negative slots: zero means every slot is zero
    c.total = 0;
    c.oldest = cur;
    return;
  }
  const floor = cur - SLOTS + 1;
  if (c.oldest >= floor) return;
  if (floor - c.oldest >= SLOTS) {
    c.slots.fill(0);
    c.total = 0;
    c.oldest = cur;
    return;
  }
  for (let i = c.oldest; i < floor; i++) {
    const at = i % SLOTS;
    c.total -= c.slots[at]!;
    c.slots[at] = 0;
  }
  c.oldest = floor;
}

/** Adds `amount` to slot `cur` (call `advance` first). */
export function charge(c: WindowCounter, cur: number, amount: number): void {
  c.slots[cur % SLOTS]! += amount;
  c.total += amount;
}

/** Gives back up to `amount` from `slot`, if that slot is still in the window. */
export function refund(c: WindowCounter, cur: number, slot: number, amount: number): void {
  advance(c, cur);
  if (slot < c.oldest || slot > cur || amount <= 0) return;
  const at = slot % SLOTS;
  const back = Math.min(c.slots[at]!, amount);
  c.slots[at] = c.slots[at]! - back;
  c.total -= back;
}

/** Milliseconds until `needed` more fits under `limit` (0 when it fits now; call `advance` first). */
export function msUntilFits(c: WindowCounter, nowMs: number, cur: number, needed: number, limit: number): number {
  const excess = c.total + needed - limit;
  if (excess <= 0) return 0;
  let freed = 0;
  for (let i = c.oldest; i <= cur; i++) {
    freed += c.slots[i % SLOTS]!;
    if (freed >= excess) return (i + SLOTS) * SLOT_MS - nowMs;
  }
  return WINDOW_MS;
}

/** Milliseconds until the oldest charge leaves the window (0 when empty; call `advance` first). */
export function msUntilOldestExpires(c: WindowCounter, nowMs: number, cur: number): number {
  if (c.total <= 0) return 0;
  for (let i = c.oldest; i <= cur; i++) {
    if (c.slots[i % SLOTS]! > 0) return (i + SLOTS) * SLOT_MS - nowMs;
  }
  return 0;
}
