import { AppError } from '../../schema/errors.ts';
import type { AppDeps } from '../context.ts';
import { findPublicInterface, type PublicInterfaceRow } from './repository.ts';

export const interfaceNotFound = () => new AppError('NOT_FOUND', 'Chat interface not found');

/** The public interface a visitor's token is for; another interface's token is a 403, a private interface a 404. */
export async function visitorInterface(deps: Pick<AppDeps, 'database'>, visitor: { chatInterfaceId: string }, slug: string): Promise<PublicInterfaceRow> {
  const iface = await findPublicInterface(deps.database.db, slug);
  if (!iface) throw interfaceNotFound();
  if (iface.id !== visitor.chatInterfaceId) throw new AppError('FORBIDDEN', 'This visitor token belongs to another chat interface');
  return iface;
}

/**
 * Whether a page on `origin` may embed or call this interface: an exact allowed origin, or a `*.` wildcard
 * entry matching a subdomain with the same scheme and port (as CSP source expressions match).
 */
export function originAllowed(origin: string, allowed: readonly string[]): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  const normalised = url.origin.toLowerCase();
  return allowed.some((entry) => {
    if (entry === normalised) return true;
    const wildcard = /^(https?):\/\/\*\.([^:]+)(?::(\d+))?$/.exec(entry);
    if (!wildcard) return false;
    const [, scheme, domain, port] = wildcard;
    return url.protocol === `${scheme}:` && url.hostname.endsWith(`.${domain}`) && url.port === (port ?? '');
  });
}

export const avatarUrlOf = (iface: { id: string; avatar_version: number }) =>
  iface.avatar_version > 0 ? `/api/v1/chat-interfaces/${iface.id}/avatar?v=${iface.avatar_version}` : null;

/** What the hosted page needs before any script runs: its title and who may frame it. Undefined when not public. */
export async function hostedPageOf(deps: Pick<AppDeps, 'database'>, slug: string) {
  const iface = await findPublicInterface(deps.database.db, slug);
  return iface && { slug: iface.slug, name: iface.name, allowedOrigins: iface.allowed_origins };
}
