import { Component, type ErrorInfo, type ReactNode } from 'react';

interface State {
  readonly error: Error | null;
}

/** A readable error in place of what failed to render, instead of a blank page. Keyed by the page, it resets on navigation. */
export class ErrorBoundary extends Component<{ children: ReactNode }, State> {
  override state: State = { error: null };

  static getDerivedStateFromError(error: unknown): State {
    return { error: error instanceof Error ? error : new Error(String(error)) };
  }

  override componentDidCatch(error: unknown, info: ErrorInfo): void {
    console.error('The console failed to render this page', error, info.componentStack);
  }

  override render(): ReactNode {
    const { error } = this.state;
    if (!error) return this.props.children;
    return (
      <section className="narrow" data-testid="render-error">
        <h1>Something went wrong</h1>
        <div className="state error" role="alert">
          <p>This page could not be shown: {error.message || 'an unexpected error'}</p>
          <p>
            <a href="/">Back to the catalog</a> or{' '}
            <button type="button" className="link-button" onClick={() => window.location.reload()}>
              reload the page
            </button>
            .
          </p>
        </div>
      </section>
    );
  }
}
