import { useQuery, useQueryClient } from '@tanstack/react-query';
import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from 'react';
import { api, type Me } from './api.tsx';
import { isUnauthorized } from './trpc.tsx';
import { forgetAllPlaygroundKeys } from './lib/playground-key.ts';

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
  readonly tenantId: string | null;
  readonly tenant: Me['tenants'][number] | null;
  setTenantId(id: string): void;
  readonly sessionKeys: readonly SessionKey[];
  addSessionKey(k: SessionKey): void;
  forgetSessionKey(id: string): void;
  refresh(): Promise<void>;
}

const SessionContext = createContext<SessionValue | null>(null);
const KEYS_STORAGE = 'infer.sessionKeys';
const TENANT_STORAGE = 'infer.tenantId';

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
  const me = useQuery({
    queryKey: ['auth.me'],
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
    await qc.invalidateQueries();
  }, [qc]);

  const value = useMemo<SessionValue>(
    () => ({
      me: data,
      loading: me.isPending,
      tenantId: tenant?.id ?? null,
      tenant,
      setTenantId,
      sessionKeys: sessionKeys.filter((k) => !tenant || k.tenantId === tenant.id),
      addSessionKey,
      forgetSessionKey,
      refresh,
    }),
    [data, me.isPending, tenant, setTenantId, sessionKeys, addSessionKey, forgetSessionKey, refresh],
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
