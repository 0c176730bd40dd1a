import type { GuardedHttpClient } from '../adapters/outbound/http/guarded-client.ts';
import { OutboundError } from '../adapters/outbound/http/outbound-error.ts';

/**
 * The save-time look at an outbound URL (webhook receivers, chat endpoints, knowledge-base providers). A literal
 * private address, or a name that resolves to one, is refused. A name that does not resolve (yet: DNS not
 * live, a typo, a resolver failure) is saved with a warning: refusing it here would protect nothing, since
 * the guarded client resolves, checks and pins the address again at every call, which is the check that counts.
 */
export type AddressAtSave = { refused: string; warning?: undefined } | { refused?: undefined; warning?: string };

export async function checkAddressAtSave(http: Pick<GuardedHttpClient, 'assertAllowed'>, field: string, url: string): Promise<AddressAtSave> {
  try {
    await http.assertAllowed(url);
    return {};
  } catch (error) {
    // A timeout here can only be the name lookup: the save-time check opens no connection.
    if (error instanceof OutboundError && (error.kind === 'dns_failure' || error.kind === 'timeout')) {
      return { warning: `${field}: ${new URL(url).hostname} did not resolve; it will be checked again at each call` };
    }
    return { refused: (error as Error).message };
  }
}

/** The optional `warnings` of a save response: present only when there is something to say. */
export const withWarnings = <T extends object>(body: T, warnings: Array<string | undefined>): T & { warnings?: string[] } => {
  const said = warnings.filter((w): w is string => w !== undefined);
  return said.length === 0 ? body : { ...body, warnings: said };
};
