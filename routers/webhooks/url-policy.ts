import { AppError } from '../../schema/errors.ts';
import type { AppDeps } from '../context.ts';

/**
 * A receiver URL must be https and resolve to public addresses only. Plain http is accepted solely for the
 * `host:port` entries of OUTBOUND_ALLOW_HOSTS, the development and testing aid that also exempts them from
 * the address rule. Returns the reason when the URL is not acceptable.
 */
export async function receiverUrlProblem(deps: Pick<AppDeps, 'http'>, text: string): Promise<string | undefined> {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'not a valid absolute URL';
  }
  if (url.username || url.password) return 'must not contain credentials';
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && deps.http.isAllowListed(url.toString()))) return 'must use https';
  try {
    await deps.http.assertAllowed(url.toString());
  } catch (error) {
    return (error as Error).message;
  }
  return undefined;
}

export async function assertReceiverUrl(deps: Pick<AppDeps, 'http'>, text: string): Promise<void> {
  const problem = await receiverUrlProblem(deps, text);
  if (problem) throw new AppError('VALIDATION_FAILED', 'Webhook URL not allowed', `url: ${problem}`);
}
