import { ServiceError } from '../../errors.ts';

/** The rules every issued secret (inference key, admin token) shares: a 1-100 character name, an expiry in the future. */
export function checkCredentialInput(rawName: string, expiresAt: Date | null | undefined): string {
  const name = rawName.trim();
  if (name.length === 0 || name.length > 100) throw new ServiceError('invalid', 'name must be 1-100 characters', 'name');
  if (expiresAt && expiresAt.getTime() <= Date.now()) {
    throw new ServiceError('invalid', 'expiresAt must be in the future', 'expiresAt');
  }
  return name;
}
