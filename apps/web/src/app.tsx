import { useMutation } from '@tanstack/react-query';
import { useEffect, useRef, useState, type ReactNode } from 'react';
import { api } from './api.tsx';
import { Loading } from './components/states.tsx';
import { AdminTokensPage } from './pages/admin-tokens.tsx';
import { AdminPage } from './pages/admin.tsx';
import { CatalogPage } from './pages/catalog.tsx';
import { DeploymentPage } from './pages/deployment.tsx';
import { DeploymentsPage } from './pages/deployments.tsx';
import { EndpointPage } from './pages/endpoint.tsx';
import { KeysPage } from './pages/keys.tsx';
import { LoginPage } from './pages/login.tsx';
import { PlaygroundPage } from './pages/playground.tsx';
import { UsagePage } from './pages/usage.tsx';
import { Link, useRouter } from './router.tsx';
import { useSession } from './session.tsx';
import { PendingInvitations } from './components/pending-invitations.tsx';
import { ErrorBoundary } from './components/error-boundary.tsx';

function NavLink({ to, children }: { to: string; children: ReactNode }) {
  const { location } = useRouter();
  const active = to === '/' ? location.path === '/' || location.path.startsWith('/endpoints/') : location.path === to || location.path.startsWith(`${to}/`);
  return (
    <Link to={to} className="nav-link" aria-current={active ? 'page' : undefined}>
      {children}
    </Link>
  );
}

function Header() {
  const session = useSession();
  const { navigate, location } = useRouter();
  const [menuOpen, setMenuOpen] = useState(false);
  // A phone's menu closes when the page changes, and on Escape (focus back on its button).
  useEffect(() => setMenuOpen(false), [location.path]);
  useEffect(() => {
    if (!menuOpen) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'Escape') return;
      setMenuOpen(false);
      document.querySelector<HTMLButtonElement>('.menu-button')?.focus();
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, [menuOpen]);
  const logout = useMutation({
    mutationFn: () => api.auth.logout(),
    onSettled: () => {
      session.end();
      navigate('/');
    },
  });
  // Logging in from a page comes back to it (not from the login page itself).
  const here = location.path + (location.query.size ? `?${location.query}` : '');
  const loginTo = location.path === '/login' || here === '/' ? '/login' : `/login?next=${encodeURIComponent(here)}`;
  const me = session.me;
  return (
    <header className="site-header">
      <div className="brand">
        <Link to="/">Inference Platform</Link>{' '}
        <span className="beta" title="This service is in beta">
          beta
        </span>
      </div>
      <button type="button" className="menu-button" aria-expanded={menuOpen} aria-controls="site-menu" onClick={() => setMenuOpen(!menuOpen)}>
        <span aria-hidden="true" className="menu-icon" /> Menu
      </button>
      <div id="site-menu" className={`site-menu${menuOpen ? ' open' : ''}`}>
        <nav aria-label="Main">
          <NavLink to="/">Catalog</NavLink>
          {me && <NavLink to="/playground">Playground</NavLink>}
          {me && <NavLink to="/keys">API keys</NavLink>}
          {me && <NavLink to="/deployments">Deployments</NavLink>}
          {me && <NavLink to="/usage">Usage</NavLink>}
          {(me?.isPlatformAdmin || session.tenant?.role === 'owner') && <NavLink to="/admin-tokens">Admin tokens</NavLink>}
          {me?.isPlatformAdmin && <NavLink to="/admin">Admin</NavLink>}
        </nav>
        <div className="account">
          {session.loading ? null : me ? (
            <>
              {me.tenants.length > 1 && (
                <label className="tenant-picker">
                  <span className="visually-hidden">Tenant</span>
                  <select value={session.tenantId ?? ''} onChange={(e) => session.setTenantId(e.target.value)}>
                    {me.tenants.map((t) => (
                      <option key={t.id} value={t.id}>
                        {t.name || t.slug}
                      </option>
                    ))}
                  </select>
                </label>
              )}
              {me.tenants.length === 1 && session.tenant && <span className="muted tenant-name">{session.tenant.name || session.tenant.slug}</span>}
              <span className="muted user-email">{me.user?.email ?? 'admin token'}</span>
              <button type="button" onClick={() => logout.mutate()} disabled={logout.isPending}>
                Log out
              </button>
            </>
          ) : (
            <Link to={loginTo} className="button">
              Log in
            </Link>
          )}
        </div>
      </div>
    </header>
  );
}

/** Pages that need a session send the visitor to the login page and back. */
function RequireLogin({ children, admin = false, tenantOptional = false }: { children: ReactNode; admin?: boolean; tenantOptional?: boolean }) {
  const session = useSession();
  const { location, navigate } = useRouter();
  const missing = !session.loading && !session.me;
  useEffect(() => {
    if (missing) navigate(`/login?next=${encodeURIComponent(location.path + (location.query.size ? `?${location.query}` : ''))}`, { replace: true });
  }, [missing, navigate, location]);
  if (session.loading) return <Loading what="Checking your session" />;
  if (!session.me) return null;
  if (admin && !session.me.isPlatformAdmin)
    return (
      <p className="state error" role="alert">
        This page is for platform admins.
      </p>
    );
  if (!admin && !session.tenant && !(tenantOptional && session.me.isPlatformAdmin))
    return (
      <p className="state empty">Your account does not belong to a tenant yet. Ask a tenant owner to invite you: invitations to your email appear above.</p>
    );
  return <>{children}</>;
}

function Routes() {
  const { location } = useRouter();
  const path = location.path;
  const endpoint = /^\/endpoints\/(.+)$/.exec(path);
  if (path === '/' || path === '/catalog') return <CatalogPage />;
  if (endpoint?.[1]) return <EndpointPage name={decodeURIComponent(endpoint[1])} />;
  if (path === '/login') return <LoginPage />;
  if (path === '/keys')
    return (
      <RequireLogin>
        <KeysPage />
      </RequireLogin>
    );
  if (path === '/deployments')
    return (
      <RequireLogin>
        <DeploymentsPage />
      </RequireLogin>
    );
  // A deployment's id is a UUID: anything else under /deployments/ is the 404 page, not a validation error.
  const deployment = /^\/deployments\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i.exec(path);
  if (deployment?.[1])
    return (
      <RequireLogin>
        <DeploymentPage id={decodeURIComponent(deployment[1])} />
      </RequireLogin>
    );
  if (path === '/usage')
    return (
      <RequireLogin>
        <UsagePage />
      </RequireLogin>
    );
  if (path === '/playground')
    return (
      <RequireLogin>
        <PlaygroundPage />
      </RequireLogin>
    );
  if (path === '/admin-tokens')
    return (
      <RequireLogin tenantOptional>
        <AdminTokensPage />
      </RequireLogin>
    );
  if (path === '/admin')
    return (
      <RequireLogin admin>
        <AdminPage />
      </RequireLogin>
    );
  return (
    <section>
      <h1>Page not found</h1>
      <p>
        Nothing lives at <code>{path}</code>. <Link to="/">Back to the catalog</Link>.
      </p>
    </section>
  );
}

const SITE = 'Inference Platform (beta)';

/**
 * What a page change means for assistive technology: the tab's title names the page (its first heading, followed as
 * it loads), and keyboard focus moves to the new content instead of staying on the link that was clicked.
 */
function usePageAnnouncements(): void {
  const { location } = useRouter();
  const first = useRef(true);
  useEffect(() => {
    const main = document.getElementById('main');
    if (!main) return;
    const title = () => {
      const h1 = main.querySelector('h1')?.textContent?.trim();
      document.title = h1 ? `${h1} · ${SITE}` : SITE;
    };
    title();
    const observer = new MutationObserver(title);
    observer.observe(main, { childList: true, subtree: true, characterData: true });
    // Not on the first page: a visitor who just arrived starts at the top, as on any site.
    if (first.current) first.current = false;
    else main.focus({ preventScroll: true });
    return () => observer.disconnect();
    // Only a new path is a new page (the query is a page's own state: filters, tabs).
  }, [location.path]);
}

export function App() {
  usePageAnnouncements();
  const { location } = useRouter();
  return (
    <>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <Header />
      <main id="main" tabIndex={-1}>
        {/* Keyed by the page: a page that failed to render is shown again once the visitor goes elsewhere. */}
        <ErrorBoundary key={location.path}>
          <PendingInvitations />
          <Routes />
        </ErrorBoundary>
      </main>
      <footer className="site-footer">Beta service. Without a GPU, endpoints answer from a runtime simulator: the text is generated, not a model's.</footer>
    </>
  );
}
