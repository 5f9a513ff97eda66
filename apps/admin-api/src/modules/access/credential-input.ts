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
