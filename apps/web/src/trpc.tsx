import { QueryClient } from '@tanstack/react-query';
import { createTRPCClient, httpBatchLink, TRPCClientError, type TRPCLink } from '@trpc/client';
import type { inferRouterInputs, inferRouterOutputs } from '@trpc/server';
import { observable } from '@trpc/server/observable';
import { issuesText, loginWording } from './lib/error-text.ts';
// Type-only: the router's shape, never its code, reaches the bundle.
import type { AppRouter } from '../../admin-api/src/trpc/root.ts';

/**
 * Calls whose 401 answers the credentials they carry (a wrong password), not a session that ended under the user; and
 * a logout of a session already gone.
 */
const CREDENTIAL_CHECKS: ReadonlySet<string> = new Set(['auth.login', 'auth.changePassword', 'auth.logout']);
const unauthorizedListeners = new Set<() => void>();

/** Calls `listener` whenever an API call is refused as unauthenticated (the session expired or was revoked); returns the unsubscribe. */
export function onUnauthorized(listener: () => void): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

/** Passes every result on, and tells the listeners of a 401: one place sees them all, whichever page made the call. */
const unauthorizedLink: TRPCLink<AppRouter> =
  () =>
  ({ op, next }) =>
    observable((observer) =>
      next(op).subscribe({
        next: (value) => observer.next(value),
        error: (err) => {
          if (isUnauthorized(err) && !CREDENTIAL_CHECKS.has(op.path)) for (const listener of unauthorizedListeners) listener();
          observer.error(err);
        },
        complete: () => observer.complete(),
      }),
    );

/** The typed tRPC client; the web app takes only the router's type from the API, never its values. */
export const trpc = createTRPCClient<AppRouter>({
  links: [unauthorizedLink, httpBatchLink({ url: '/trpc', fetch: (url, init) => fetch(url, { ...init, credentials: 'same-origin' }) })],
});

export type RouterInputs = inferRouterInputs<AppRouter>;
export type RouterOutputs = inferRouterOutputs<AppRouter>;

export const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      staleTime: 10_000,
      refetchOnWindowFocus: false,
      retry: (count, err) => count < 2 && !(err instanceof TRPCClientError && [400, 401, 403, 404].includes(err.data?.httpStatus ?? 0)),
    },
  },
});

/** A message fit to show a user. */
export function errorMessage(err: unknown): string {
  if (err instanceof TRPCClientError) {
    const wording = loginWording(err.data?.code, err.message);
    if (wording) return wording;
    const zodIssues = (err.data as { zodError?: { fieldErrors?: Record<string, string[]> } } | undefined)?.zodError;
    const fields = zodIssues?.fieldErrors ? Object.entries(zodIssues.fieldErrors).map(([k, v]) => `${k}: ${v.join(', ')}`) : [];
    if (fields.length > 0) return fields.join('; ');
    return issuesText(err.message) ?? (err.message || 'The request failed.');
  }
  if (err instanceof Error) return issuesText(err.message) ?? err.message;
  return 'Something went wrong.';
}

export function isNotFound(err: unknown): boolean {
  return err instanceof TRPCClientError && err.data?.code === 'NOT_FOUND';
}

export function isUnauthorized(err: unknown): boolean {
  return err instanceof TRPCClientError && err.data?.code === 'UNAUTHORIZED';
}
