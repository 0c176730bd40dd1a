import { AppError } from '../../schema/errors.ts';
import type { AppDeps } from '../context.ts';
import { checkAddressAtSave } from '../address-at-save.ts';

/** Whether a stored receiver URL is https, as URL parses it: `HTTPS://...` is (a prefix test on the text said no). */
export function usesHttps(text: string): boolean {
  try {
    return new URL(text).protocol === 'https:';
  } catch {
    return false;
  }
}

/**
 * A receiver URL must be https and resolve to public addresses only. Plain http is accepted solely for the
 * `host:port` entries of OUTBOUND_ALLOW_HOSTS, the development and testing aid that also exempts them from
 * the address rule. Returns the reason when the URL's form is not acceptable.
 */
function receiverUrlFormProblem(deps: Pick<AppDeps, 'http'>, text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'not a valid absolute URL';
  }
  if (url.username || url.password) return 'must not contain credentials';
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && deps.http.isAllowListed(url.toString()))) return 'must use https';
  return undefined;
}

/** Validate's question, "would a delivery go out now?": a name that does not resolve is a problem here. */
export async function receiverUrlProblem(deps: Pick<AppDeps, 'http'>, text: string): Promise<string | undefined> {
  const form = receiverUrlFormProblem(deps, text);
  if (form) return form;
  try {
    await deps.http.assertAllowed(text);
  } catch (error) {
    return (error as Error).message;
  }
  return undefined;
}

/** Create and update: refused for its form or a private address; a name that does not resolve yet is saved, with the warning returned. */
export async function checkReceiverUrlAtSave(deps: Pick<AppDeps, 'http'>, text: string): Promise<string | undefined> {
  const form = receiverUrlFormProblem(deps, text);
  const checked = form === undefined ? await checkAddressAtSave(deps.http, 'url', text) : { refused: form };
  if (checked.refused !== undefined) throw new AppError('VALIDATION_FAILED', 'Webhook URL not allowed', `url: ${checked.refused}`);
  return checked.warning;
}
