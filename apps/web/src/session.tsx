import { useQuery, useQueryClient } from '@tanstack/react-query';
import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from 'react';
import { api, type Me } from './api.tsx';
import { forgetAllPlaygroundKeys } from './lib/playground-key.ts';
import { useRouter } from './router.tsx';
import { isUnauthorized, onUnauthorized } from './trpc.tsx';

/** A key created in this browser tab: its secret lives only in sessionStorage, for the playground and snippets. */
export interface SessionKey {
  readonly id: string;
  readonly tenantId: string;
  readonly name: string;
  readonly prefix: string;
  readonly secret: string;
}

interface SessionValue {
  readonly me: Me | null;
  readonly loading: boolean;
  /** True after the API refused this session (expired or revoked elsewhere), until the next login. */
  readonly expired: boolean;
  readonly tenantId: string | null;
  readonly tenant: Me['tenants'][number] | null;
  setTenantId(id: string): void;
  readonly sessionKeys: readonly SessionKey[];
  addSessionKey(k: SessionKey): void;
  forgetSessionKey(id: string): void;
  refresh(): Promise<void>;
  /** Ends the session in this tab at once: logged out everywhere on the page, cached data and this tab's keys gone. */
  end(): void;
}

const SessionContext = createContext<SessionValue | null>(null);
const KEYS_STORAGE = 'infer.sessionKeys';
const TENANT_STORAGE = 'infer.tenantId';
const ME_KEY = ['auth.me'] as const;

function loadKeys(): SessionKey[] {
  try {
    const raw = sessionStorage.getItem(KEYS_STORAGE);
    const parsed: unknown = raw ? JSON.parse(raw) : [];
    return Array.isArray(parsed) ? (parsed as SessionKey[]) : [];
  } catch {
    return [];
  }
}

export function SessionProvider({ children }: { children: ReactNode }) {
  const qc = useQueryClient();
  const { navigate } = useRouter();
  const me = useQuery({
    queryKey: ME_KEY,
    queryFn: async () => {
      try {
        return await api.auth.me();
      } catch (err) {
        if (isUnauthorized(err)) return null;
        throw err;
      }
    },
    staleTime: 60_000,
  });
  const [tenantId, setTenantIdState] = useState<string | null>(() => localStorage.getItem(TENANT_STORAGE));
  const [sessionKeys, setSessionKeys] = useState<SessionKey[]>(loadKeys);
  const [expired, setExpired] = useState(false);

  const data = me.data ?? null;
  const tenant = data?.tenants.find((t) => t.id === tenantId) ?? data?.tenants[0] ?? null;

  useEffect(() => {
    sessionStorage.setItem(KEYS_STORAGE, JSON.stringify(sessionKeys));
  }, [sessionKeys]);

  const setTenantId = useCallback((id: string) => {
    localStorage.setItem(TENANT_STORAGE, id);
    setTenantIdState(id);
  }, []);
  const addSessionKey = useCallback((k: SessionKey) => setSessionKeys((ks) => [k, ...ks.filter((x) => x.id !== k.id)]), []);
  const forgetSessionKey = useCallback((id: string) => setSessionKeys((ks) => ks.filter((x) => x.id !== id)), []);
  const refresh = useCallback(async () => {
    setExpired(false);
    await qc.invalidateQueries();
  }, [qc]);
  const end = useCallback(() => {
    clearSessionKeys();
    setSessionKeys([]);
    // `me` set, not refetched: every page and the header read it, so they change in this render. The rest of the
    // cache is the old session's data; dropped, not refetched (a refetch of a tenant's data would only be refused).
    qc.setQueryData(ME_KEY, null);
    qc.removeQueries({ predicate: (q) => q.queryKey[0] !== ME_KEY[0] });
  }, [qc]);

  // A call refused as unauthenticated while logged in: the session ended on the server (expired, revoked, logged out
  // in another tab). Say so on the login page, and come back here after it.
  useEffect(
    () =>
      onUnauthorized(() => {
        if (!qc.getQueryData(ME_KEY)) return;
        end();
        setExpired(true);
        const { pathname, search } = window.location;
        if (pathname !== '/login') navigate(`/login?next=${encodeURIComponent(pathname + search)}`, { replace: true });
      }),
    [qc, end, navigate],
  );

  const value = useMemo<SessionValue>(
    () => ({
      me: data,
      loading: me.isPending,
      expired,
      tenantId: tenant?.id ?? null,
      tenant,
      setTenantId,
      sessionKeys: sessionKeys.filter((k) => !tenant || k.tenantId === tenant.id),
      addSessionKey,
      forgetSessionKey,
      refresh,
      end,
    }),
    [data, me.isPending, expired, tenant, setTenantId, sessionKeys, addSessionKey, forgetSessionKey, refresh, end],
  );
  return <SessionContext.Provider value={value}>{children}</SessionContext.Provider>;
}

export function useSession(): SessionValue {
  const v = useContext(SessionContext);
  if (!v) throw new Error('useSession outside SessionProvider');
  return v;
}

export function clearSessionKeys(): void {
  sessionStorage.removeItem(KEYS_STORAGE);
  forgetAllPlaygroundKeys();
}
