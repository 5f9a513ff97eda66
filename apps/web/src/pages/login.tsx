import { useMutation } from '@tanstack/react-query';
import { useEffect, useState, type FormEvent } from 'react';
import { api } from '../api.tsx';
import { ErrorBox } from '../components/states.tsx';
import { useRouter } from '../router.tsx';
import { safeNext } from '../lib/safe-next.ts';
import { useSession } from '../session.tsx';

export function LoginPage() {
  const { location, navigate } = useRouter();
  const session = useSession();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const next = safeNext(location.query.get('next'));
  const login = useMutation({
    mutationFn: () => api.auth.login(email.trim(), password),
    onSuccess: async () => {
      await session.refresh();
      navigate(next, { replace: true });
    },
  });
  useEffect(() => {
    if (session.me && !login.isPending && !login.isSuccess) navigate(next, { replace: true });
  }, [session.me, login.isPending, login.isSuccess, navigate, next]);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    login.mutate();
  };
  return (
    <section className="narrow">
      <h1>Log in</h1>
      {session.expired ? (
        <p className="state" role="status" data-testid="login-reason">
          Your session has ended. Log in to continue.
        </p>
      ) : (
        location.query.has('next') && (
          <p className="state" role="status" data-testid="login-reason">
            Log in to continue.
          </p>
        )
      )}
      <p className="muted">Log in for API keys, your tenant-scoped dedicated URLs, usage and the playground.</p>
      <form className="form" onSubmit={submit}>
        <div className="field">
          <label htmlFor="login-email">Email</label>
          <input id="login-email" type="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </div>
        <div className="field">
          <label htmlFor="login-password">Password</label>
          <input id="login-password" type="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
        </div>
        <button type="submit" className="primary" disabled={login.isPending}>
          {login.isPending ? 'Logging in…' : 'Log in'}
        </button>
        {login.isError && <ErrorBox error={login.error} />}
      </form>
    </section>
  );
}
