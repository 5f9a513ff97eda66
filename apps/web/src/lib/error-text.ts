interface Issue {
  readonly message?: unknown;
  readonly path?: unknown;
}

/**
 * A validation error's raw JSON (zod's issue list, as a message), as one readable line ("search: Too big"); null when
 * `message` is not such a list. Users never see the JSON itself.
 */
export function issuesText(message: string): string | null {
  const text = message.trim();
  if (!text.startsWith('[') && !text.startsWith('{')) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  const list: unknown[] = Array.isArray(parsed) ? parsed : [parsed];
  const issues = list.filter((i): i is Issue => typeof i === 'object' && i !== null && typeof (i as Issue).message === 'string');
  if (issues.length === 0) return null;
  return issues
    .map((i) => {
      const path = Array.isArray(i.path) ? i.path.join('.') : '';
      return path ? `${path}: ${String(i.message)}` : String(i.message);
    })
    .join('; ');
}

/**
 * The API's refusal of an anonymous call, in the console's words: its own wording is for API clients ("log in or send
 * an admin token"), and console users log in. Null for any other error (a wrong password keeps its message).
 */
export function loginWording(code: string | undefined, message: string): string | null {
  return code === 'UNAUTHORIZED' && /admin token/i.test(message) ? 'Log in to continue.' : null;
}
