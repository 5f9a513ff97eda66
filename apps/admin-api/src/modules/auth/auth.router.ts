import { z } from 'zod';
import { publicProcedure, router } from '../../trpc/init.ts';
import { isPlatformAdmin } from '../access/access.ts';
import { listCallerTenants } from '../tenants/tenants.service.ts';
import { changePassword, getUserById, login } from './auth.service.ts';
import { invalidateSession } from './sessions.ts';

const loginInput = z.object({
  email: z.string().trim().min(3).max(320),
  password: z.string().min(1).max(1024),
});

export const authRouter = router({
  /** Email + password -> session cookie (HttpOnly, SameSite=Lax). Throttled per account, IP and both; never batched. */
  login: publicProcedure.input(loginInput).mutation(async ({ ctx, input }) => {
    const { user, token, session } = await login(ctx.db, { ...input, ip: ctx.ip }, ctx.loginThrottle);
    ctx.setSessionCookie(token, session.expiresAt);
    return {
      user: { id: user.id, email: user.email, displayName: user.displayName, isPlatformAdmin: user.isPlatformAdmin },
      expiresAt: session.expiresAt,
    };
  }),

  /**
   * The logged-in user's new password (the current one must be right; counted like a login). Every
   * other session of the user ends; this one stays.
   */
  changePassword: publicProcedure
    .input(z.object({ currentPassword: z.string().min(1).max(1024), newPassword: z.string().min(8).max(1024) }))
    .mutation(async ({ ctx, input }) => changePassword(ctx.db, ctx.principal, { ...input, ip: ctx.ip }, ctx.loginThrottle)),

  /** Ends the session (row deleted) and clears the cookie; harmless when not logged in. */
  logout: publicProcedure.mutation(async ({ ctx }) => {
    if (ctx.principal.kind === 'user') await invalidateSession(ctx.db, ctx.principal.sessionId);
    ctx.clearSessionCookie();
    return { ok: true as const };
  }),

  /**
   * The caller: null when anonymous. Users get their tenants with roles; a tenant admin token gets
   * its one tenant (as owner); a platform token none (it sees all via `tenants.all`).
   */
  me: publicProcedure.query(async ({ ctx }) => {
    const p = ctx.principal;
    if (p.kind === 'anonymous') return null;
    const tenants = (await listCallerTenants(ctx.db, p)).map((t) => ({ id: t.id, slug: t.slug, name: t.name, role: t.role }));
    if (p.kind === 'user') {
      const user = await getUserById(ctx.db, p.userId);
      return {
        kind: 'user' as const,
        user: user && { id: user.id, email: user.email, displayName: user.displayName },
        token: null,
        isPlatformAdmin: isPlatformAdmin(p),
        tenants,
      };
    }
    return { kind: 'admin_token' as const, user: null, token: { id: p.tokenId, tenantId: p.tenantId }, isPlatformAdmin: isPlatformAdmin(p), tenants };
  }),
});
