import type { Db } from '../src/db.ts';
import { issueAdminToken } from '../src/modules/auth/admin-tokens.service.ts';
import { createUser } from '../src/modules/auth/auth.service.ts';
import { resolvePrincipal } from '../src/modules/auth/resolve-principal.ts';
import { createSession } from '../src/modules/auth/sessions.ts';
import type { Principal } from '../src/modules/access/principal.ts';
import { addMember, createTenant, type Tenant } from '../src/modules/tenants/tenants.service.ts';

export const PASSWORD = 'correct horse battery staple';
export const PUBLIC_URLS = Object.freeze({ sharedBaseUrl: 'http://127.0.0.1:9/endpoints/v1', dataplaneUrl: 'http://127.0.0.1:9' });

export interface Party {
  /** Cookie header value for users, Authorization header value for tokens, nothing for anonymous. */
  readonly cookie?: string;
  readonly authorization?: string;
  readonly userId?: string;
  readonly email?: string;
}

export interface World {
  tenantA: Tenant;
  tenantB: Tenant;
  parties: {
    anonymous: Party;
    memberA: Party;
    ownerA: Party;
    ownerB: Party;
    admin: Party;
    platformToken: Party;
    tokenA: Party;
  };
}

export type PartyName = keyof World['parties'];

let seq = 0;
const unique = (s: string): string => `${s}-${process.pid}-${++seq}`;

async function userWithSession(db: Db, email: string, isPlatformAdmin = false): Promise<Party> {
  const user = await createUser(db, { email, password: PASSWORD, isPlatformAdmin });
  const { token } = await createSession(db, user.id);
  return { cookie: `session=${token}`, userId: user.id, email: user.email };
}

/** Two tenants and one caller of each kind, with real sessions and real admin tokens. */
export async function buildWorld(db: Db): Promise<World> {
  const tenantA = await createTenant(db, { slug: unique('tenant-a'), name: 'Tenant A' });
  const tenantB = await createTenant(db, { slug: unique('tenant-b'), name: 'Tenant B' });
  const memberA = await userWithSession(db, `${unique('member-a')}@example.com`);
  const ownerA = await userWithSession(db, `${unique('owner-a')}@example.com`);
  const ownerB = await userWithSession(db, `${unique('owner-b')}@example.com`);
  const admin = await userWithSession(db, `${unique('admin')}@example.com`, true);
  await addMember(db, { tenantId: tenantA.id, userId: memberA.userId!, role: 'member' });
  await addMember(db, { tenantId: tenantA.id, userId: ownerA.userId!, role: 'owner' });
  await addMember(db, { tenantId: tenantB.id, userId: ownerB.userId!, role: 'owner' });
  const platform = await issueAdminToken(db, { name: 'platform', tenantId: null, userId: admin.userId });
  const scoped = await issueAdminToken(db, { name: 'tenant a', tenantId: tenantA.id, userId: ownerA.userId });
  return {
    tenantA,
    tenantB,
    parties: {
      anonymous: {},
      memberA,
      ownerA,
      ownerB,
      admin,
      platformToken: { authorization: `Bearer ${platform.secret}` },
      tokenA: { authorization: `Bearer ${scoped.secret}` },
    },
  };
}

/** The principal of a party, resolved the way the transports do. */
export function principalOf(db: Db, party: Party): Promise<Principal> {
  return resolvePrincipal(db, { cookieHeader: party.cookie, authorization: party.authorization });
}

export interface TrpcResponse<T = unknown> {
  status: number;
  headers: Headers;
  setCookie: string[];
  body: { result?: { data: T }; error?: { message: string; code: number; data: { code: string; httpStatus: number; param: string | null } } };
}

/** One tRPC call over real HTTP (no batching, no transformer). */
export async function trpc<T = unknown>(
  baseUrl: string,
  path: string,
  opts: { input?: unknown; mutation?: boolean; headers?: Record<string, string> } = {},
): Promise<TrpcResponse<T>> {
  const url = new URL(`${baseUrl}/trpc/${path}`);
  const init: RequestInit = { headers: { ...opts.headers } };
  if (opts.mutation) {
    init.method = 'POST';
    init.headers = { 'content-type': 'application/json', ...opts.headers };
    init.body = JSON.stringify(opts.input ?? null);
  } else if (opts.input !== undefined) {
    url.searchParams.set('input', JSON.stringify(opts.input));
  }
  const res = await fetch(url, init);
  return { status: res.status, headers: res.headers, setCookie: res.headers.getSetCookie(), body: (await res.json()) as TrpcResponse<T>['body'] };
}
