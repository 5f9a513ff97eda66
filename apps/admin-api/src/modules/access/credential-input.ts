import { sql } from 'kysely';
import { checkName } from '../../check-name.ts';
import { ServiceError } from '../../errors.ts';
import { checkApiInstant } from '../../instant.ts';

/** The rules every issued secret (inference key, admin token) shares: a 1-100 character name, an expiry in the future. */
export function checkCredentialInput(rawName: string, expiresAt: Date | null | undefined): string {
  const name = checkName(rawName, 'name', { max: 100 });
  if (expiresAt && expiresAt.getTime() <= Date.now()) {
    throw new ServiceError('invalid', 'expiresAt must be in the future', 'expiresAt');
  }
  if (expiresAt) checkApiInstant(expiresAt, 'expiresAt');
  return name;
}

/**
 * A credential row (an inference key, an admin token) that still works: not revoked, not expired. One condition for
 * the live-credential quotas and the keys nodes are sent.
 */
export const liveCredential = sql<boolean>`revoked_at is null and (expires_at is null or expires_at > now())`;
