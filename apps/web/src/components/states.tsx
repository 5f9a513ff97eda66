import type { ReactNode } from 'react';
import { errorMessage } from '../trpc.tsx';

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p className="state loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" /> {what}…
    </p>
  );
}

export function ErrorBox({ error, retry }: { error: unknown; retry?: () => void }) {
  return (
    <div className="state error" role="alert">
      <p>{errorMessage(error)}</p>
      {retry && (
        <button type="button" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="state empty">{children}</p>;
}

/** Renders loading / error / content for a query-like object. */
export function QueryView<T>(props: {
  query: { isPending: boolean; isError: boolean; error: unknown; data: T | undefined; refetch: () => unknown };
  what?: string;
  children: (data: T) => ReactNode;
}) {
  const { query } = props;
  if (query.isPending) return <Loading what={props.what ? `Loading ${props.what}` : 'Loading'} />;
  if (query.isError) return <ErrorBox error={query.error} retry={() => void query.refetch()} />;
  return <>{props.children(query.data as T)}</>;
}
