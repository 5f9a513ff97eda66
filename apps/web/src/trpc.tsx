import { QueryClient } from '@tanstack/react-query';
import { createTRPCClient, httpBatchLink, TRPCClientError } from '@trpc/client';
import type { inferRouterInputs, inferRouterOutputs } from '@trpc/server';
// Type-only: the router's shape, never its code, reaches the bundle.
import type { AppRouter } from '../../admin-api/src/trpc/root.ts';

/** The typed tRPC client; the web app takes only the router's type from the API, never its values. */
export const trpc = createTRPCClient<AppRouter>({
  links: [httpBatchLink({ url: '/trpc', fetch: (url, init) => fetch(url, { ...init, credentials: 'same-origin' }) })],
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
    const zodIssues = (err.data as { zodError?: { fieldErrors?: Record<string, string[]> } } | undefined)?.zodError;
    const fields = zodIssues?.fieldErrors ? Object.entries(zodIssues.fieldErrors).map(([k, v]) => `${k}: ${v.join(', ')}`) : [];
    if (fields.length > 0) return fields.join('; ');
    return err.message || 'The request failed.';
  }
  if (err instanceof Error) return err.message;
  return 'Something went wrong.';
}

export function isNotFound(err: unknown): boolean {
  return err instanceof TRPCClientError && err.data?.code === 'NOT_FOUND';
}

export function isUnauthorized(err: unknown): boolean {
  return err instanceof TRPCClientError && err.data?.code === 'UNAUTHORIZED';
}
