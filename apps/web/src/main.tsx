import { QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './app.tsx';
import { ErrorBoundary } from './components/error-boundary.tsx';
import { RouterProvider } from './router.tsx';
import { SessionProvider } from './session.tsx';
import { queryClient } from './trpc.tsx';
import './styles.css';

const root = document.getElementById('root');
if (!root) throw new Error('#root missing');
createRoot(root).render(
  <StrictMode>
    {/* The last resort: whatever fails outside a page (the header, a provider) still leaves a readable error. */}
    <ErrorBoundary>
      <QueryClientProvider client={queryClient}>
        <RouterProvider>
          <SessionProvider>
            <App />
          </SessionProvider>
        </RouterProvider>
      </QueryClientProvider>
    </ErrorBoundary>
  </StrictMode>,
);
