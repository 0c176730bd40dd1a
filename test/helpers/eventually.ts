/** Polls `check` until it holds, bounded: notifications reach other connections asynchronously on PostgreSQL. */
export async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 3_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * A change made in SQL on this instance: seen at once on PGlite (its notification arrives before the statement
 * returns), within `eventually`'s bound on PostgreSQL (on commit, through the listening connection).
 */
export async function seenAfterSql(check: () => Promise<boolean>, what: string) {
  if (process.env.DATABASE_URL) await eventually(check, what);
  else if (!(await check())) throw new Error(`not at once on the embedded database: ${what}`);
}

/** Polls `check` until it answers something, bounded, and returns that answer. */
export async function until<T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await check();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
