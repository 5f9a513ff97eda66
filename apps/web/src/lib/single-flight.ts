import { useCallback, useRef } from 'react';

/**
 * A mutation's `mutate` that ignores a call while the previous one is running. The guard is set synchronously, so a
 * second click in the same tick (a double click, before React re-renders the button disabled) does nothing: one click
 * creates one key or token.
 */
export function useSingleFlight<T>(mutation: { mutateAsync(v: T): Promise<unknown> }): (v: T) => void {
  const busy = useRef(false);
  const { mutateAsync } = mutation;
  return useCallback(
    (v: T) => {
      if (busy.current) return;
      busy.current = true;
      // The mutation's own onError shows the failure; this only frees the guard.
      mutateAsync(v)
        .catch(() => {})
        .finally(() => {
          busy.current = false;
        });
    },
    [mutateAsync],
  );
}
