import { ApiError } from '@infer/shared';
import type { z } from 'zod';

type Issue = z.core.$ZodIssue;

/** `messages[0].role` from `['messages', 0, 'role']`. */
const paramOf = (path: readonly PropertyKey[]): string =>
  path.reduce<string>((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc === '' ? String(p) : `${acc}.${String(p)}`), '');

function reasonOf(issue: Issue): string {
  if (issue.code === 'invalid_union') {
    // A union with its own message (`stop`: "a string or an array of at most 4 strings") says it best.
    if (issue.message !== 'Invalid input') return issue.message;
    // Prefer the branch that explains the string form ("must be an integer") over "expected number".
    const inner = issue.errors.flat().find((i) => i.code !== 'invalid_type') ?? issue.errors.flat()[0];
    if (inner?.code === 'invalid_value') return 'must be a boolean (true or false)';
    return inner ? reasonOf(inner) : issue.message;
  }
  return issue.message;
}

/** The first validation issue as a 400 `invalid_request` naming the field in `param`. */
export function validationError(error: z.ZodError): ApiError {
  const issue = error.issues[0];
  if (issue === undefined) return new ApiError('invalid_request', 'Invalid request body.');
  const param = paramOf(issue.path);
  if (param === '') return new ApiError('invalid_request', 'The request body must be a JSON object.');
  if (issue.code === 'invalid_type' && /received undefined/.test(issue.message)) {
    return new ApiError('invalid_request', `Missing required parameter: '${param}'.`, param);
  }
  return new ApiError('invalid_request', `Invalid value for '${param}': ${reasonOf(issue)}.`, param);
}
